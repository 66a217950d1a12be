"""Copies known by their origin (``Message._origin``, 104691b): identity may only ever stand for equality.

Redaction's ledger, the transcript's copy test and ``same_meta_but_id`` answer "equal but for ``meta["id"]``" by
``a._origin is b._origin``, and a copy made slot by slot keeps its source's fingerprint. The property: after any
sequence of copies (an id given, other meta given, an id removed, other content, a copy of a copy), every two
messages sharing an origin are equal field by field but for their ids, every fingerprint is the one the
constructor's message has, and a copy owns the nested values it was given.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, ToolCall, same_meta_but_id
from contextfold.serialize import dumps_messages, loads_messages

SEEDS = (
    Message("user", "hello"),
    Message("tool", "out\n" * 5, tool_call_id="c1", name="read", meta={"id": "t1", "tags": ["a"]}),
    Message("assistant", "", tool_calls=(ToolCall("c1", "read", '{"p": 1}'),), extra={"x": {"y": 1}}),
)

steps = st.lists(st.tuples(st.integers(0, 50),
                           st.sampled_from(["id", "id", "meta", "no-id", "content", "id+meta"]),
                           st.text(max_size=4)), min_size=1, max_size=12)


def _constructed(m: Message) -> Message:
    return Message(m.role, m.content, m.tool_calls, m.tool_call_id, m.name, dict(m.meta), dict(m.extra))


def _equal_but_id(a: Message, b: Message) -> bool:
    rest_a = {k: v for k, v in a.meta.items() if k != "id"}
    rest_b = {k: v for k, v in b.meta.items() if k != "id"}
    return (a.role, a.content, a.tool_calls, a.tool_call_id, a.name, dict(a.extra), rest_a, "id" in a.meta) == (
        b.role, b.content, b.tool_calls, b.tool_call_id, b.name, dict(b.extra), rest_b, "id" in b.meta)


@settings(max_examples=40, deadline=None)
@given(steps)
def test_messages_sharing_an_origin_are_equal_but_for_their_ids(plan: list[tuple[int, str, str]]) -> None:
    made: list[Message] = list(SEEDS)
    given_values: list[tuple[Message, str, Any]] = []
    for pick, how, text in plan:
        source = made[pick % len(made)]
        if how == "id":
            m = source.with_meta(id=f"id-{text}")
        elif how == "meta":
            value = {"note": [text]}
            m = source.with_meta(note=value)
            given_values.append((m, "note", value))
        elif how == "no-id":
            m = source.with_meta(id=None)
        elif how == "content":
            m = source.with_content(f"{source.text}{text}")
        else:
            m = source.with_meta(id=f"id-{text}", tag=text)
        made.append(m)
    for a in made:
        assert a.fingerprint() == _constructed(a).fingerprint()
        assert a == _constructed(a)
        for b in made:
            if a._origin is not None and a._origin is b._origin:
                assert _equal_but_id(a, b), (a, b)
                assert same_meta_but_id(a, b)
    # what a caller handed stays the caller's: changing it later changes no message
    for m, key, value in given_values:
        value["note"].append("changed")
        assert "changed" not in m.meta[key]["note"]
    # the transcript writes every copy as the message it is
    assert loads_messages(dumps_messages(made)) == made
