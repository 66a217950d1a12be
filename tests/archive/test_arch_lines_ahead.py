"""A transcript takes the lines the read-ahead made (issue 22): each message's line cut around its id, not made again.

Every message a manager holds is a copy of the caller's (``with_meta(id=...)``), so a transcript meets each as the
first copy of its origin. Its line, serialized ahead (``message_line``), is cut before the id's JSON for the other
copies; whatever the shape (extra, parts, the id not last in meta, a value or text that looks like the id's end, a
lone surrogate) the bytes are each message's own JSON form.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import serialize
from contextfold.messages import Message, TextPart, ToolCall
from contextfold.serialize import encode_message_pieces, json_text, message_line, message_to_dict

_nonce = "ahead-7f3c"
_text = st.text(alphabet=st.characters(codec=None), max_size=10) | st.sampled_from(
    ['"id":"s:1"}}', 'quote " and \\ back', "lone \ud800 surrogate", "ünï ✓", "y" * 300])


def _expected(history: list[Message]) -> bytes:
    return "".join(json_text(message_to_dict(m), separators=(",", ":")) + "\n" for m in history).encode()


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Message], list[bool]]:
    originals = []
    for n in range(draw(st.integers(1, 4))):
        content = draw(_text | st.builds(lambda a, b: (TextPart(a), TextPart(b)), _text, _text))
        meta = draw(st.dictionaries(st.sampled_from(["source", "ref", "kind"]), _text, max_size=2))
        extra = draw(st.sampled_from([{}, {"x": "s:1"}, {"p": 1}]))
        calls = tuple(draw(st.lists(st.builds(ToolCall, _text, _text, st.just('{"a": 1}')), max_size=1)))
        originals.append(Message("assistant", content, calls, meta=meta, extra=extra, name=f"{_nonce}{n}"))
    history: list[Message] = []
    for n in range(draw(st.integers(1, 10))):
        m = draw(st.sampled_from(originals))
        own = draw(st.sampled_from([f"s:{n}", 's:1"}}', "lone \udc00", f"ünï{n}"]))
        copy = m.with_meta(id=own)
        if draw(st.booleans()):  # (the id not last: another key after it, then a copy of that)
            copy = copy.with_meta(after="v").with_meta(id=f"{own}+")
        history.append(copy)
    warmed = draw(st.lists(st.booleans(), min_size=len(history), max_size=len(history)))
    return history, warmed


@settings(max_examples=60, deadline=None)
@given(sessions())
def test_lines_made_ahead_give_each_message_its_own_json_form(session: tuple[list[Message], list[bool]]) -> None:
    history, warmed = session
    for m, ahead in zip(history, warmed, strict=True):
        if ahead:
            message_line(m)
    assert b"".join(encode_message_pieces(history)) == _expected(history)


def test_a_message_serialized_ahead_is_not_encoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = (ToolCall("c1", "bash", '{"cmd": "ls"}'),)
    originals = [Message("assistant", f"{_nonce} plan " * 40, calls, meta={"source": "x"}),
                 Message("tool", f"{_nonce} out " * 90, tool_call_id="c1", name="bash")]
    history = [m.with_meta(id=f"s:{n}:{k}") for n in range(3) for k, m in enumerate(originals)]
    first = history[:2]
    for m in first:
        message_line(m)

    def refused(*_: object) -> None:
        raise AssertionError("encoded again")

    monkeypatch.setattr(serialize, "_template_of", refused)
    monkeypatch.setattr(serialize, "_encode_line", refused)
    monkeypatch.setattr(serialize, "_plain_pieces", refused)
    pieces = encode_message_pieces(history)
    assert b"".join(pieces) == _expected(history)
    assert pieces[0] is pieces[4] is pieces[8]  # (the copies share the head of their line)


def test_copies_of_any_shape_are_encoded_once_per_origin(monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = [
        Message("assistant", "", (ToolCall("c1", "bash", '{"cmd": "ls"}'),), name=_nonce,
                extra={"_wire": {"format": "openai_chat", "raw": {"content": ""}}}),  # (an importer's wire form)
        Message("user", (TextPart(f"{_nonce} a"), TextPart("b")), meta={"k": "v"}),
        Message("user", f"{_nonce} lone \ud800 surrogate " * 20),
        Message("tool", f'{_nonce} holds "\\u0000contextfold:id-marker\\u0000" and \x00contextfold:id-marker\x00',
                tool_call_id="c1", extra={"x": 1}),
    ]
    history = [m.with_meta(id=own) for own in ("s:1", 'q"2', "ünï3", "s:4") for m in shapes]
    encoded: list[Message] = []
    real = serialize._encode_line
    monkeypatch.setattr(serialize, "_encode_line", lambda m, *a, **k: encoded.append(m) or real(m, *a, **k))
    assert b"".join(encode_message_pieces(history)) == _expected(history)
    assert len(encoded) <= len(shapes) + 4  # (a probe per origin; the marker's own text: each of its copies)


def test_a_copy_alone_of_its_origin_is_one_piece_and_copies_share_a_head() -> None:
    # (issue 22, cold compaction: each message of a session is the only copy of its origin in the transcript; its
    # line is encoded whole, not cut into a template's head and its id's part.)
    originals = [Message("tool", f"{_nonce} alone {n} \"quoted\"\n" * 30, tool_call_id=f"c{n}", name="bash")
                 for n in range(3)]
    twice = Message("user", f"{_nonce} said twice " * 20)
    history = [m.with_meta(id=f"s:{n}") for n, m in enumerate(originals)] + \
        [twice.with_meta(id="t:1"), twice.with_meta(id="t:2")]
    pieces = encode_message_pieces(history)
    assert b"".join(pieces) == _expected(history)
    assert len(pieces) == len(originals) + 4  # (one each; then the copies: a shared head and their own part each)
    assert pieces[-4] is pieces[-2]
