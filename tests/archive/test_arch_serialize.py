"""The contextfold JSON form loses nothing: message_from_dict(message_to_dict(m)) == m for every message."""

from __future__ import annotations

import json
from typing import Any

import pytest

try:  # tests/ is a package (tests/__init__.py) in the repository; plain `conftest` when it is not
    from tests.conftest import all_session_files, require
except ImportError:  # pragma: no cover
    from conftest import all_session_files, require  # type: ignore[no-redef]
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.errors import InvalidHistory
from contextfold.messages import DocumentPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart
from contextfold.serialize import dumps_messages, loads_messages, message_from_dict, message_to_dict

# JSON values (no tuples: JSON has none, see the module docstring). Keys are strings, as in JSON.
_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_maps = st.dictionaries(st.text(max_size=8), _json, max_size=3)
_opt_text = st.none() | st.text(max_size=20)
_cc = st.none() | _maps

_parts = st.one_of(
    st.builds(TextPart, st.text(max_size=40), cache_control=_cc, extra=_maps),
    st.builds(
        ImagePart, url=_opt_text, data=_opt_text, media_type=_opt_text, detail=_opt_text, cache_control=_cc, extra=_maps
    ),
    st.builds(
        DocumentPart,
        url=_opt_text,
        data=_opt_text,
        file_id=_opt_text,
        media_type=_opt_text,
        title=_opt_text,
        cache_control=_cc,
        extra=_maps,
    ),
    st.builds(
        ThinkingPart,
        text=st.text(max_size=20),
        signature=_opt_text,
        redacted=st.booleans(),
        encrypted=_opt_text,
        cache_control=_cc,
        extra=_maps,
    ),
    st.builds(UnknownPart, data=_maps, format=st.text(max_size=8), cache_control=_cc, extra=_maps),
)
_calls = st.builds(ToolCall, st.text(max_size=10), st.text(max_size=10), st.text(max_size=30), extra=_maps)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
    content=st.text(max_size=60) | st.lists(_parts, max_size=4).map(tuple),
    tool_calls=st.lists(_calls, max_size=3).map(tuple),
    tool_call_id=_opt_text,
    name=_opt_text,
    meta=_maps,
    extra=_maps,
)


@settings(max_examples=100, deadline=None)
@given(messages)
def test_round_trip_is_lossless(m: Message) -> None:
    d = message_to_dict(m)
    back = message_from_dict(json.loads(json.dumps(d)))
    assert back == m
    assert back.fingerprint() == m.fingerprint()
    assert message_to_dict(back) == d


@settings(max_examples=15, deadline=None)
@given(st.lists(messages, max_size=6))
def test_jsonl_round_trip_keeps_order_and_line_count(ms: list[Message]) -> None:
    text = dumps_messages(ms)
    assert text.count("\n") == len(ms)
    assert loads_messages(text) == ms


def test_form_is_openai_chat_like() -> None:
    m = Message.assistant("hi", [ToolCall("c1", "bash", '{"cmd":"ls"}')], meta={"id": "m1"})
    assert message_to_dict(m) == {
        "role": "assistant",
        "content": "hi",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd":"ls"}'}}],
        "meta": {"id": "m1"},
    }
    assert message_to_dict(Message.tool("c1", "out", name="bash")) == {
        "role": "tool",
        "content": "out",
        "tool_call_id": "c1",
        "name": "bash",
    }


def test_empty_string_and_empty_parts_stay_distinct() -> None:
    assert message_from_dict(message_to_dict(Message("user", ""))).content == ""
    assert message_from_dict(message_to_dict(Message("user", ()))).content == ()


def test_unicode_line_separators_do_not_split_lines() -> None:
    ms = [Message.user("a\u2028b\x85c\x1cd"), Message.user("e")]
    assert loads_messages(dumps_messages(ms)) == ms


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        ({"role": "robot", "content": ""}, "role: unknown role 'robot'"),
        ({"role": "user", "content": 3}, "content: must be a string or a list of parts"),
        ({"role": "user", "content": [{"type": "video"}]}, "content[0].type: unknown part type 'video'"),
        ({"role": "user", "content": [{"type": "text"}]}, "content[0].text"),
        ({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": 1}}]}, "tool_calls[0].function.name"),
        ({"role": "user", "meta": []}, "message.meta: must be an object"),
        ({"role": "user", "colour": "red"}, "unknown key(s) 'colour'"),
    ],
)
def test_bad_input_names_the_field(d: dict[str, Any], expected: str) -> None:
    with pytest.raises(InvalidHistory) as err:
        message_from_dict(d, index=7)
    assert "message 7" in str(err.value)
    assert expected in str(err.value)


def test_bad_jsonl_names_the_line() -> None:
    text = dumps_messages([Message.user("a")]) + "{not json\n"
    with pytest.raises(InvalidHistory, match=r"t\.jsonl line 2: not JSON"):
        loads_messages(text, source="t.jsonl")


def test_every_recorded_session_round_trips() -> None:
    files = all_session_files()
    require(bool(files), "no recorded sessions under shared/data/trajectories")
    from contextfold.importers._files import load_sessions

    count = 0
    for path in files:
        for session in load_sessions(path):
            ms = list(session.messages)
            assert loads_messages(dumps_messages(ms)) == ms, session.id
            count += len(ms)
    assert count > 1000


def test_lines_remembered_by_message_are_the_lines_computed_afresh() -> None:
    # dumps_messages remembers each message's line (issue 15): a message is immutable, so its line never changes.
    import json as _json

    from contextfold.serialize import dumps_messages, json_text, message_line, message_to_dict

    messages = [Message.user("hi \ud800 there"), Message("assistant", "", (ToolCall("c1", "bash", '{"cmd": "ls"}'),)),
                Message("tool", "a\u2028b", tool_call_id="c1", name="bash", meta={"id": "x", "ref": "tout_1"})]
    fresh = "".join(json_text(message_to_dict(m), separators=(",", ":")) + "\n" for m in messages)
    assert dumps_messages(messages) == fresh
    assert dumps_messages(messages) == fresh  # remembered now
    assert message_line(messages[0]) is message_line(messages[0])
    equal_but_new = Message.user("hi \ud800 there")
    assert message_line(equal_but_new) == message_line(messages[0])
    assert _json.loads(fresh.split("\n")[2])["meta"] == {"id": "x", "ref": "tout_1"}


# The common shape the line writer encodes directly (text content, no extra; ``messages`` adds structured meta values),
# with the characters JSON must escape and lone surrogates.
_awkward_text = st.text(alphabet=st.characters(codec=None), max_size=30) | st.sampled_from(
    ['quote " and \\ back', "tab\tnew\nline\x00nul", "lone \ud800 surrogate", "ünïcödé ✓"])
_plain_messages = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant", "tool"]),
    content=_awkward_text,
    tool_calls=st.lists(st.builds(ToolCall, _awkward_text, _awkward_text, _awkward_text), max_size=2).map(tuple),
    tool_call_id=st.none() | _awkward_text,
    name=st.none() | _awkward_text,
    meta=st.dictionaries(_awkward_text, _awkward_text, max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_plain_messages | messages, max_size=5))
def test_lines_written_directly_are_the_lines_of_the_json_form(batch: list[Message]) -> None:
    from contextfold.serialize import json_text

    expected = "".join(json_text(message_to_dict(m), separators=(",", ":")) + "\n" for m in batch)
    assert dumps_messages(batch) == expected
    assert loads_messages(expected) == batch
    # What the archive writes: the same text, encoded line by line (issue 22: the text is not held whole).
    from contextfold.serialize import encode_messages

    assert encode_messages(batch) == expected.encode()
