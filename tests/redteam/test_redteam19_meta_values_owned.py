"""What a transcript writes of a meta value is what redaction checked; a part's or call's ``extra=None`` is empty.

Found by the fifteenth session's review of lane F4's branch (fbec811):

1. A caller-owned mutable value in a message's meta that is no dict, list, set or tuple (a ``deque``, a ``bytearray``,
   an object whose ``__str__`` changes) was shared with the caller. Once a compaction had read the message and found
   it clean (the verdict is kept), a ``password=...`` the caller wrote into that value reached the archive in clear:
   the transcript writes such a value's current text (``serialize._unknown``, since 3834118). A message now holds
   such a value as that text, taken once when the message is built; a frozenset's and a set's members likewise.
2. ``check_messages`` (lane E, 0212598) refused ``TextPart("x", extra=None)`` and ``ToolCall(..., extra=None)``,
   which 96ca2cf took through add/prepare/compact/close: such a part's or call's ``extra`` is now the empty mapping,
   as a message's ``meta=None`` and ``extra=None`` are.
"""

from __future__ import annotations

import datetime
import json
from collections import deque
from typing import Any

import pytest

from contextfold.manager import ContextManager
from contextfold.messages import EMPTY, Message, TextPart, ToolCall
from contextfold.serialize import message_to_dict

NONCE = "rt19-owned-5e1b"
SECRET = "password=Hunter2Zq9Xv7Lm3Np"
BARE = "Hunter2Zq9Xv7Lm3Np"


class Tag:
    """An application's object whose text it changes later."""

    def __init__(self) -> None:
        self.text = "plain-tag"

    def __str__(self) -> str:
        return self.text


def _value(kind: str) -> Any:
    return {"deque": deque(["a"]), "bytearray": bytearray(b"plain"), "object": Tag(),
            "frozenset": frozenset({Tag()}), "set": {Tag()}, "tuple": ("a", Tag())}[kind]


def _change(kind: str, value: Any) -> None:
    if kind == "deque":
        value.append(SECRET)
    elif kind == "bytearray":
        value[:] = SECRET.encode()
    elif kind == "object":
        value.text = SECRET
    elif kind == "tuple":
        value[1].text = SECRET
    else:
        next(iter(value)).text = SECRET


KINDS = ["deque", "bytearray", "object", "frozenset", "set", "tuple"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_archive_never_gets_what_the_caller_wrote_into_a_meta_value_after_it_was_checked(kind: str) -> None:
    # Fails on fbec811 (deque, bytearray, object, frozenset, set, tuple): the transcript held the secret in clear.
    value = _value(kind)
    cm = ContextManager(model="gpt-4o", max_context_tokens=4000, store="memory", archive="memory",
                        session_id=f"{NONCE}-{kind}", message_id_prefix="m")
    cm.add([{"role": "system", "content": "sys"}])
    cm.add([Message("user", f"hello there {NONCE}", meta={"v": value})])
    cm.add([{"role": "assistant", "content": "ok " * 30}])
    cm.prepare("openai_chat")
    cm.compact()  # the message is read and found clean
    _change(kind, value)
    for i in range(2):
        cm.add([{"role": "user", "content": f"more {i} " * 40}, {"role": "assistant", "content": "ok " * 40}])
        cm.compact()
    cm.close()
    assert cm.archive is not None
    archived = [m for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
    assert NONCE in repr(archived)
    written = [json.dumps(message_to_dict(m)) for m in archived]
    assert not [line for line in written if BARE in line]


@pytest.mark.parametrize("kind", KINDS)
def test_a_message_holds_the_text_of_a_value_json_has_no_form_for_as_serialize_writes_it(kind: str) -> None:
    value = _value(kind)
    before = json.dumps(message_to_dict(Message.user(NONCE, meta={"v": value})))
    m = Message.user(NONCE, meta={"v": value})
    _change(kind, value)
    assert BARE not in repr(m.meta)
    assert json.dumps(message_to_dict(m)) == before  # the same line as before: the text serialize writes


def test_values_whose_text_never_changes_are_kept_as_they_are() -> None:
    when = datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.UTC)
    values = {"when": when, "n": 3, "x": 1.5, "c": 2j, "b": b"raw", "flag": True, "none": None, "s": NONCE,
              "frozen": frozenset({"a", "b"}), "day": when.date(), "span": datetime.timedelta(seconds=3)}
    m = Message.user(NONCE, meta=values)
    for key, value in values.items():
        assert m.meta[key] is value or m.meta[key] == value
        assert type(m.meta[key]) is type(value)
    assert Message.user(NONCE, meta={"d": deque([1])}).meta["d"] == "deque([1])"
    assert Message.user(NONCE, meta={"b": bytearray(b"x")}).meta["b"] == "bytearray(b'x')"


def test_a_value_set_by_with_meta_is_held_as_its_text_too() -> None:
    tag = Tag()
    m = Message.user(NONCE).with_meta(tag=tag, tags=[tag])
    tag.text = SECRET
    assert m.meta["tag"] == "plain-tag" and m.meta["tags"] == ["plain-tag"]


def test_a_part_or_a_call_given_extra_none_has_the_empty_extra() -> None:
    assert TextPart("x", extra=None).extra is EMPTY  # type: ignore[arg-type]
    assert ToolCall("c1", "t", "{}", extra=None).extra is EMPTY  # type: ignore[arg-type]
    assert TextPart("x", cache_control=None).cache_control is None


@pytest.mark.parametrize("case", ["message", "text_part", "tool_call"])
def test_extra_none_goes_through_add_prepare_compact_and_close_as_on_96ca2cf(case: str) -> None:
    # Fails on fbec811 (text_part, tool_call): "content[0].extra: must be a mapping, got NoneType".
    messages = {
        "message": [Message("user", f"q {NONCE}", meta=None, extra=None)],  # type: ignore[arg-type]
        "text_part": [Message("user", (TextPart(f"x {NONCE}", extra=None),))],  # type: ignore[arg-type]
        "tool_call": [Message("user", f"q {NONCE}"),
                      Message("assistant", "", (ToolCall("c1", "t", "{}", extra=None),)),  # type: ignore[arg-type]
                      Message("tool", "r", tool_call_id="c1")],
    }[case]
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=f"{NONCE}-{case}")
    cm.add(messages)
    assert cm.prepare("openai_chat")
    assert cm.prepare("gemini")
    cm.compact()
    cm.close()
