"""Copies of a message in one transcript (issue 22): the first copy's line, the copy's own id swapped in.

A repeated history holds the same content, calls and meta objects in every copy, only ``meta["id"]`` differs. The
line of each must still be exactly the line of its JSON form, whatever the id (a lone surrogate, a quote, not a
string), wherever it sits in ``meta``, and whatever else differs (a value that is equal but not the same object,
another role, name or call id, a key missing).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, ToolCall
from contextfold.serialize import (
    dumps_messages,
    encode_message_pieces,
    encode_messages,
    json_text,
    loads_messages,
    message_to_dict,
)

_text = st.text(alphabet=st.characters(codec=None), max_size=12) | st.sampled_from(
    ['quote " and \\ back', "lone \ud800 surrogate", "ünïcödé ✓", "x" * 300])
_ids = _text | st.integers(0, 99) | st.none()


@st.composite
def repeated_histories(draw: st.DrawFn) -> list[Message]:
    originals = []
    for _ in range(draw(st.integers(1, 3))):
        calls = tuple(draw(st.lists(st.builds(ToolCall, _text, _text, _text), max_size=2)))
        meta = draw(st.dictionaries(st.sampled_from(["source", "kind", "ref", "big"]), _text, max_size=3))
        position = draw(st.integers(0, len(meta)))
        items = list(meta.items())
        items.insert(position, ("id", "first"))
        originals.append(Message(draw(st.sampled_from(["user", "assistant", "tool"])), draw(_text), calls,
                                 draw(st.none() | _text), draw(st.none() | _text), dict(items)))
    out: list[Message] = []
    for n in range(draw(st.integers(1, 12))):
        m = draw(st.sampled_from(originals))
        change = draw(st.sampled_from(["id", "id", "id", "equal content", "name", "no id", "meta value"]))
        own = draw(_ids)
        meta = {k: (own if k == "id" else v) for k, v in m.meta.items()}
        if change == "equal content":
            m = Message(m.role, "".join(list(m.content)), m.tool_calls, m.tool_call_id, m.name, meta)
        elif change == "name":
            m = Message(m.role, m.content, m.tool_calls, m.tool_call_id, f"other{n}", meta)
        elif change == "no id":
            m = Message(m.role, m.content, m.tool_calls, m.tool_call_id, m.name,
                        {k: v for k, v in m.meta.items() if k != "id"})
        elif change == "meta value" and len(meta) > 1:
            key = next(k for k in meta if k != "id")
            m = Message(m.role, m.content, m.tool_calls, m.tool_call_id, m.name, {**meta, key: f"v{n}"})
        else:
            m = m.with_meta(id=own) if own is not None else m.with_meta(id=None)
        out.append(m)
    return out


@settings(max_examples=100, deadline=None)
@given(repeated_histories())
def test_each_copy_is_written_as_its_own_json_form(history: list[Message]) -> None:
    expected = "".join(json_text(message_to_dict(m), separators=(",", ":")) + "\n" for m in history)
    assert dumps_messages(history) == expected
    assert encode_messages(history) == expected.encode()
    assert b"".join(encode_message_pieces(history)) == expected.encode()  # (what the in-memory store keeps)
    assert loads_messages(expected) == history


def test_a_repeated_history_is_written_line_for_line() -> None:
    calls = (ToolCall("c1", "bash", '{"cmd": "ls"}'),)
    first = Message("assistant", "running " * 50, calls, meta={"source": {"agent": "main"}, "id": "s:1"})
    result = Message("tool", "out \ud800 " * 80, tool_call_id="c1", name="bash", meta={"id": "s:2", "ref": "tout_1"})
    history = [first, result] + [m.with_meta(id=f"s:{n}") for n in range(3, 9) for m in (first, result)]
    expected = "".join(json_text(message_to_dict(m), separators=(",", ":")) + "\n" for m in history)
    assert dumps_messages(history) == expected


def test_a_message_sharing_the_objects_but_not_a_copy_leaves_the_copies_their_own_lines() -> None:
    calls = (ToolCall("c1", "bash", '{"cmd": "ls"}'),)
    first = Message("assistant", "running " * 50, calls, name="agent", meta={"id": "s:1"})
    renamed = Message("assistant", first.content, calls, name="other", meta={"id": "s:2"})
    moved = Message("assistant", first.content, calls, name="agent", meta={"kind": "x", "id": "s:3"})
    history = [first, renamed, moved, first.with_meta(id="s:4"), renamed.with_meta(id="s:5"), first.with_meta(id="s:6")]
    expected = "".join(json_text(message_to_dict(m), separators=(",", ":")) + "\n" for m in history)
    assert dumps_messages(history) == expected
    assert b"".join(encode_message_pieces(history)) == expected.encode()


def test_copies_given_an_id_by_with_meta_are_written_as_their_json_form_in_every_shape() -> None:
    from contextfold.messages import TextPart

    calls = (ToolCall("c1", "bash", '{"cmd": "ls"}'),)
    shapes = [
        Message("assistant", "plan " * 60, calls, meta={"source": {"a": [1, 2]}}),
        Message("tool", "out " * 80, tool_call_id="c1", name="bash", extra={"provider": "x"}),  # (extra: own line)
        Message("user", (TextPart("a"), TextPart("b")), meta={"id": "kept first", "k": "v"}),  # (parts)
        Message("user", "lone \ud800 in the text " * 20),  # (a surrogate in the line: own line)
    ]
    ids = ["s:1", "quote \" id", "ünï", "lone \udc00 id", "s:5"]
    history = [m.with_meta(id=own).with_meta(id=f"{own}+") if n % 2 else m.with_meta(id=own)
               for n, own in enumerate(ids) for m in shapes]
    expected = "".join(json_text(message_to_dict(m), separators=(",", ":")) + "\n" for m in history)
    assert b"".join(encode_message_pieces(history)) == expected.encode()
    assert loads_messages(expected) == history
