"""The list ``prepare()`` returns is reused only when the caller let go of it unchanged (issue 22, ``_handed``).

Whatever the caller does with the lists it is given (keeps them, changes them and lets go, lets go), every request is
byte for byte the one built from scratch (the slow path: the whole normalized view encoded anew), and a list the
caller kept never changes afterwards. A list let go of is reused: a no-op ``prepare()`` then allocates nothing that
grows with the history, the list included.
"""

from __future__ import annotations

import bisect
import json
import operator
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.compaction import Policy
from contextfold.formats import get_format
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall

_NO_LIMIT = 10_000_000  # far above the histories built here: nothing is ever compacted or masked
IDS = ("a", "b", "c")  # few ids: reuse across turns, duplicates, orphans and late results happen often


def manager(*, status: bool = False) -> ContextManager:
    policy = Policy(emergency_message_count=_NO_LIMIT, tool_output_budget_tokens=_NO_LIMIT,
                    context_status="always" if status else "off")
    return ContextManager("gpt-4o", max_context_tokens=_NO_LIMIT, policy=policy, store="memory", archive=False,
                          session_id="handed", message_id_prefix="m")


def slow_path(cm: ContextManager, api: str) -> Any:
    """The request built from scratch: the whole normalized view encoded anew, then the budget line if any."""
    view = cm._view.normalized()
    if api == "messages":
        return view
    status = cm.status_message()
    wire = get_format(api)
    return wire.encode([*view, *([status] if status is not None else [])])


def call(cm: ContextManager, api: str) -> list[Any]:
    result: list[Any] = cm.prepare_messages() if api == "messages" else cm.prepare(api)
    return result


def dump(items: list[Any]) -> str:
    """Byte-exact text of a request (Message objects by their canonical fingerprint)."""
    return json.dumps([m.fingerprint() if isinstance(m, Message) else m for m in items])


# What a caller may do to the list it was given before letting go of it.
MUTATIONS: dict[str, Callable[[list[Any]], None]] = {
    "append": lambda items: items.append({"role": "assistant", "content": "the reply"}),
    "extend": lambda items: items.extend([{"role": "user", "content": "more"}]),
    "setitem": lambda items: items.__setitem__(0, {"role": "user", "content": "replaced"}),
    "delitem": lambda items: items.__delitem__(len(items) // 2),
    "pop": lambda items: items.pop(),
    "insert": lambda items: items.insert(1, {"role": "user", "content": "inserted"}),
    "clear": lambda items: items.clear(),
    "reverse": lambda items: items.reverse(),
    "slice": lambda items: items.__setitem__(slice(0, 2), []),
    "equal_copy": lambda items: items.__setitem__(0, dict(items[0]) if isinstance(items[0], dict) else items[0]),
    "swap": lambda items: items.__setitem__(slice(None), [items[-1], *items[1:-1], items[0]][: len(items)]),
    "sort": lambda items: items.sort(key=lambda item: -id(item)),
    "remove": lambda items: items.remove(items[len(items) // 2]),
    "iadd": lambda items: items.__iadd__([{"role": "user", "content": "added"}]),
    "imul": lambda items: items.__imul__(2),
    "shuffle": lambda items: random.Random(len(items)).shuffle(items),
    "operator": lambda items: operator.setitem(items, -1, {"role": "user", "content": "set"}),
    "insort": lambda items: bisect.insort(items, items[0], key=lambda item: 0),
}


@st.composite
def batch(draw: Any) -> list[Message]:
    out: list[Message] = []
    for _ in range(draw(st.integers(1, 4))):
        role = draw(st.sampled_from(("user", "calls", "tool", "tool", "assistant")))
        if role == "calls":
            ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True))
            calls = tuple(ToolCall(i, "bash", json.dumps({"cmd": i})) for i in ids)
            out.append(Message("assistant", draw(st.sampled_from(("", "running it"))), calls))
        elif role == "tool":
            out.append(Message("tool", draw(st.sampled_from(("ok", "fail"))), tool_call_id=draw(st.sampled_from(IDS)),
                               name="bash"))
        else:
            out.append(Message(role, draw(st.sampled_from(("go on", "fix it", "done")))))
    return out


@st.composite
def step(draw: Any) -> tuple[str, Any]:
    kind = draw(st.sampled_from(("add", "add", "prepare", "prepare", "prepare", "rewrite")))
    if kind == "add":
        return kind, draw(batch())
    if kind == "prepare":
        return kind, (draw(st.sampled_from(("openai_chat", "openai_responses", "messages"))),
                      draw(st.sampled_from(("drop", "drop", "keep", *MUTATIONS))))
    return kind, None


@settings(max_examples=40, deadline=None)
@given(st.lists(step(), min_size=1, max_size=20), st.booleans())
def test_every_request_is_the_slow_paths_and_kept_lists_never_change(steps: list[tuple[str, Any]],
                                                                     status: bool) -> None:
    cm = manager(status=status)
    cm.add(Message.system("you are a coding agent"))
    kept: list[tuple[list[Any], str]] = []
    try:
        for kind, arg in steps:
            if kind == "add":
                cm.add(arg)
            elif kind == "rewrite":
                cm._view.replace(cm._view.normalized())  # what masking and compaction do: the prefix starts again
            else:
                api, then = arg
                got = call(cm, api)
                assert dump(got) == dump(slow_path(cm, api))
                if then == "keep":
                    kept.append((got, dump(got)))
                elif then != "drop" and got:
                    MUTATIONS[then](got)
                del got
            for items, text in kept:
                assert dump(items) == text
    finally:
        cm.close()


def _turn(i: int) -> list[Message]:
    call_ = ToolCall(f"call_{i}", "bash", json.dumps({"cmd": f"grep -n item_{i} src/app.py"}))
    return [Message.user(f"step {i}: look for item_{i}"), Message.assistant("looking", [call_]),
            Message.tool(f"call_{i}", f"src/app.py:{i}: item_{i} = {i * 7}", name="bash")]


@pytest.mark.parametrize("api", ["openai_chat", "openai_responses", "messages"])
def test_a_list_the_caller_keeps_is_never_changed_and_the_next_one_is_new(api: str) -> None:
    cm = manager()
    try:
        cm.add([m for i in range(5) for m in _turn(i)])
        first = call(cm, api)
        snapshot = dump(first)
        assert snapshot == dump(slow_path(cm, api))
        for i in range(5, 9):
            cm.add(_turn(i))
            nxt = call(cm, api)
            assert nxt is not first
            assert dump(nxt) == dump(slow_path(cm, api))
            del nxt  # let go: the next call may reuse it, never ``first``
        assert dump(first) == snapshot
    finally:
        cm.close()


@pytest.mark.parametrize("api", ["openai_chat", "messages"])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_list_changed_and_let_go_leaves_nothing_in_the_next_request(api: str, mutation: str) -> None:
    cm = manager()
    try:
        cm.add([m for i in range(4) for m in _turn(i)])
        call(cm, api)  # the list the next call hands out again
        got = call(cm, api)
        MUTATIONS[mutation](got)
        del got
        for i in range(4, 6):
            cm.add(_turn(i))
            assert dump(call(cm, api)) == dump(slow_path(cm, api))
            assert dump(call(cm, api)) == dump(slow_path(cm, api))  # no new message: the same list again
    finally:
        cm.close()


def test_the_list_handed_out_is_a_list_and_its_copies_are_plain_lists() -> None:
    import copy
    import pickle

    cm = manager()
    try:
        cm.add([m for i in range(3) for m in _turn(i)])
        got = cm.prepare()
        assert isinstance(got, list)
        assert got == slow_path(cm, "openai_chat")
        for twin in (copy.copy(got), copy.deepcopy(got), pickle.loads(pickle.dumps(got)), got[:], got.copy()):
            assert type(twin) is list and twin == got
    finally:
        cm.close()
