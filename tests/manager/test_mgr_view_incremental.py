"""The view answers per-turn questions from what is new (issue 22): same answers as reading the whole view.

``View.answered()`` reads the tail and the settled prefix's latest user message only; it must equal
``answered_indices`` of the whole normalized view after any sequence of appends, late results, replacements and
reads. A no-op ``prepare()`` must not allocate more with a longer history (tracemalloc, deterministic).
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.answered import answered_indices
from contextfold.compaction import Policy
from contextfold.manager import ContextManager
from contextfold.manager._view import View
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCall
from contextfold.tokens import EstimatingCounter, MessageCounter

IDS = ("a", "b", "c")  # few ids: reuse across turns, duplicates and late results happen often


@st.composite
def step(draw: Any) -> tuple[str, list[Message]]:
    """One operation on a view: append a batch of messages, read it, or replace it with its normalized form."""
    kind = draw(st.sampled_from(("append", "append", "append", "read", "replace")))
    if kind != "append":
        return kind, []
    batch: list[Message] = []
    for _ in range(draw(st.integers(1, 4))):
        role = draw(st.sampled_from(("user", "assistant", "calls", "tool", "tool", "system", "empty")))
        if role == "calls":
            ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3))
            calls = tuple(ToolCall(i, "bash", json.dumps({"cmd": i})) for i in ids)
            batch.append(Message("assistant", draw(st.sampled_from(("", "running it"))), calls))
        elif role == "tool":
            batch.append(Message("tool", draw(st.sampled_from(("ok", "fail"))), tool_call_id=draw(st.sampled_from(IDS)),
                                 name="bash"))
        elif role == "empty":
            batch.append(Message("assistant", ""))
        else:
            batch.append(Message(role, draw(st.sampled_from(("go on", "fix it", "done")))))
    return kind, batch


@settings(max_examples=300, deadline=None)
@given(st.lists(step(), min_size=1, max_size=25))
def test_answered_from_the_tail_is_answered_of_the_whole_view(steps: list[tuple[str, list[Message]]]) -> None:
    view = View(MessageCounter(EstimatingCounter()))
    for kind, batch in steps:
        if kind == "append":
            keep, _ = view.split_orphans(batch)
            view.append(keep)
        elif kind == "replace":
            view.replace(view.normalized())
        whole = view.normalized()
        assert view.answered() == answered_indices(whole)
        start, tail = view.tail()
        assert whole[start:] == tail


# -- allocations of a no-op prepare() ------------------------------------------------------------------------------

# Far above the histories built here: the policy always answers "nothing to do".
_NO_LIMIT = 10_000_000


def _turn(i: int) -> list[Message]:
    call = ToolCall(f"call_{i}", "bash", json.dumps({"cmd": f"grep -n item_{i} src/app.py"}))
    return [Message.user(f"step {i}: look for item_{i}"), Message.assistant("looking", [call]),
            Message.tool(f"call_{i}", f"src/app.py:{i}: item_{i} = {i * 7}", name="bash")]


def _thinking_turn(i: int) -> list[Message]:
    """A turn whose assistant messages think (a provider's reasoning: the view holds reasoning from then on)."""
    call = ToolCall(f"call_{i}", "bash", json.dumps({"cmd": f"grep -n item_{i} src/app.py"}))
    return [Message.user(f"step {i}: look for item_{i}"),
            Message("assistant", (ThinkingPart(f"item_{i} is in src/app.py", signature=f"sig_{i}"),), (call,)),
            Message.tool(f"call_{i}", f"src/app.py:{i}: item_{i} = {i * 7}", name="bash"),
            Message("assistant", (ThinkingPart(f"found item_{i}", signature=f"done_{i}"), TextPart(f"item_{i} found")))]


def _peak_of_noop_prepares(history_turns: int, api: str, calls: int = 20, *, with_the_list: bool = False,
                           turn: Callable[[int], list[Message]] = _turn, **policy_fields: Any) -> int:
    """The memory a prepare() with nothing to compact holds at its peak after a new turn, beyond the list it returns.

    In bytes, the least of ``calls`` turns: another thread (an exporter left by an earlier test) can only add to a
    call's figure, and pairing the whole view would show in every call. ``with_the_list``: the returned list counted
    too (the caller lets go of it before its next call, so the manager may hand the same list out again).
    """
    policy = Policy(emergency_message_count=_NO_LIMIT, tool_output_budget_tokens=_NO_LIMIT, **policy_fields)
    cm = ContextManager("gpt-4o", max_context_tokens=_NO_LIMIT, policy=policy, store="memory", archive=False,
                        session_id="alloc", message_id_prefix="m")
    cm.add([m for i in range(history_turns) for m in turn(i)])
    cm.prepare()
    for i in range(history_turns, history_turns + 3):  # warm every per-turn path once
        cm.add(turn(i))
        cm.prepare()
    cm.tokens()  # waits for the exact tokenizer: its loading thread must not allocate while we measure
    gc.collect()
    least: int | None = None
    tracemalloc.start()
    try:
        for i in range(history_turns + 3, history_turns + 3 + calls):
            cm.add(turn(i))
            tracemalloc.reset_peak()
            start, _ = tracemalloc.get_traced_memory()
            sent = cm.prepare() if api == "prepare" else cm.prepare_messages()
            _, peak = tracemalloc.get_traced_memory()
            # A new list holds one pointer per message: its buffer is the one thing that grows with the view.
            held = peak - start - (0 if with_the_list else sys.getsizeof(sent))
            least = held if least is None else min(least, held)
            del sent  # the caller lets go before its next call
    finally:
        tracemalloc.stop()
        cm.close()
    assert least is not None
    return least


@pytest.mark.parametrize("api", ["prepare", "prepare_messages"])
def test_a_noop_prepare_allocates_the_same_with_ten_times_the_history(api: str) -> None:
    # Before issue 22, pairing the whole view on every call allocated an object per tool call: ~260 KB more here.
    small = _peak_of_noop_prepares(100, api)
    big = _peak_of_noop_prepares(1_000, api)
    assert big <= small + 2_048, (small, big)


@pytest.mark.parametrize("api", ["prepare", "prepare_messages"])
def test_a_list_let_go_is_reused_so_nothing_grows_with_the_history(api: str) -> None:
    # A new list per call holds 8 bytes per message: 2.4 KB at 100 turns, 24 KB at 1,000 (manager/_handed.py).
    small = _peak_of_noop_prepares(100, api, with_the_list=True)
    big = _peak_of_noop_prepares(1_000, api, with_the_list=True)
    assert big <= small + 2_048, (small, big)


def test_a_view_holding_reasoning_is_not_copied_by_every_prepare() -> None:
    # keep_thinking_turns reads the view for old reasoning on every call. It used to copy the whole view twice to find
    # out (the normalized list, then the cleared one), also while old reasoning waits to free clear_at_least.
    small = _peak_of_noop_prepares(100, "prepare", turn=_thinking_turn, keep_thinking_turns=1,
                                   clear_at_least=_NO_LIMIT)
    big = _peak_of_noop_prepares(1_000, "prepare", turn=_thinking_turn, keep_thinking_turns=1,
                                 clear_at_least=_NO_LIMIT)
    assert big <= small + 2_048, (small, big)


def test_a_message_appended_after_an_empty_one_normalization_dropped_is_in_the_view() -> None:
    # Settling dropped the empty assistant message as the new one arrived: the view had as many messages as before and
    # the tail read before the append was taken for the new one (found by test_mgr_mask_state's property test).
    view = View(MessageCounter(EstimatingCounter()))
    view.append([Message.user("go on"), Message("assistant", "")])
    assert view.normalized() == [Message.user("go on")]
    view.append([Message("assistant", "on it")])
    assert view.normalized() == [Message.user("go on"), Message("assistant", "on it")]
