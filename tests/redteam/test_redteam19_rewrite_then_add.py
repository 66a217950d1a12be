"""add() after rewrite_view() keeps the message, with the answered output shown wider (red team 19).

Found by a reviewer on 96ca2cf: a rewrite_view() that leaves a result whose call it dropped (an orphan the next
settle takes out) while the answered output is shown wider, then add(): narrowing the wider output asked
``CacheEconomics.keeps_wide`` (which counts the view, so settles it) between reading an index and writing there.
The settle dropped the orphan, the list was one shorter, and ``View.replace_at`` raised IndexError: the message
given to add() was lost, and the output stayed wider with its standard view forgotten. (An insertion by the settle
would have put the standard view on another message, silently.) Narrowing now settles before asking, finds each
output again by its id right before it changes, and forgets a standard view only once it is put back.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold import ContextManager
from contextfold.manager._answered_view import WIDENED_META
from contextfold.messages import Message

NONCE = "rt19rwadd"
_T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _manager() -> ContextManager:
    ticks = itertools.count()
    return ContextManager(model="gpt-4o", max_context_tokens=3000, store="memory", archive="memory",
                          session_id=NONCE, message_id_prefix="m", archive_events=False,
                          clock=lambda: _T0 + datetime.timedelta(seconds=next(ticks)))


def _call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": '{"a": 0}'}}


def _drop_three_after_first(view: list[Message]) -> list[Message]:
    return view[:1] + view[4:]


def _minimised_history(cm: ContextManager) -> None:
    """The reviewer's minimised random history, up to the add() that failed."""
    cm.add([{"role": "system", "content": f"You are helpful {NONCE}. " * 3}])
    cm.add([{"role": "assistant", "content": "answer 0 " * 24,
             "tool_calls": [_call("call_1", "tool0"), _call("call_2", "tool1")]}])
    cm.add([{"role": "assistant", "content": None, "tool_calls": [_call("call_5", "tool0"), _call("call_6", "tool1")]},
            {"role": "tool", "tool_call_id": "call_6", "content": f"result call_6 {NONCE} " * 300}])
    cm.prepare("openai_chat")
    assert any(m.meta.get(WIDENED_META) for m in cm._view.raw), "the answered output is shown wider"
    # Leaves the aborted output of call_2 without its call: the next settle drops it.
    assert cm.rewrite_view(_drop_three_after_first, reason="t") == 3


def test_add_after_rewrite_keeps_the_message() -> None:
    cm = _manager()
    _minimised_history(cm)
    question = f"q4 {NONCE} " + "word " * 70
    cm.add([{"role": "user", "content": question}])  # raised IndexError (list assignment index out of range)
    messages = cm.messages()
    assert messages[-1].role == "user" and messages[-1].text == question
    output = next(m for m in messages if m.tool_call_id == "call_6")
    assert not output.meta.get(WIDENED_META), "the output went back to its standard view"
    assert not cm._widening.active  # type: ignore[union-attr]
    cm.prepare("openai_chat")
    cm.add([{"role": "assistant", "content": f"done {NONCE}"}])
    assert cm.messages()[-1].text == f"done {NONCE}"
    cm.close()


def test_a_failing_keep_leaves_the_view_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """add() is all or nothing: a raise while narrowing adds nothing and forgets no standard view."""
    cm = _manager()
    _minimised_history(cm)
    before = cm.messages()

    def broken(index: int, wide: Message, standard: Message) -> bool:
        raise RuntimeError(f"keeps_wide broke {NONCE}")

    monkeypatch.setattr(cm._compaction, "keeps_wide", broken)
    with pytest.raises(RuntimeError, match="keeps_wide broke"):
        cm.add([{"role": "user", "content": f"lost? {NONCE}"}])
    assert cm.messages() == before  # nothing added, the output still wider
    assert cm._widening.active  # type: ignore[union-attr]  # (its standard view remembered)
    monkeypatch.undo()
    cm.add([{"role": "user", "content": f"kept {NONCE}"}])
    messages = cm.messages()
    assert messages[-1].text == f"kept {NONCE}"
    assert not next(m for m in messages if m.tool_call_id == "call_6").meta.get(WIDENED_META)
    cm.close()


def _check_pairing(wire: list[dict[str, Any]]) -> None:
    """Every result answers a call made before it and not yet answered; every call is answered."""
    open_calls: set[str] = set()
    for item in wire:
        if item["role"] == "assistant":
            open_calls.update(c["id"] for c in item.get("tool_calls") or ())
        elif item["role"] == "tool":
            assert item["tool_call_id"] in open_calls, item
            open_calls.discard(item["tool_call_id"])
    assert not open_calls, open_calls


# An assistant turn: (calls made, how many answered, outputs' size: 300 is cut at write time, widened when answered).
_TURN = st.tuples(st.integers(0, 2), st.integers(0, 2), st.sampled_from([0, 300]))
# A round: turns added, a prepare() (the answered output shown wider), a rewrite dropping ``count`` messages from
# ``start`` (0: none; it may leave a result whose call it took, or a call unanswered), then a user message (None) or
# another turn, and a prepare() again.
_ROUND = st.tuples(st.lists(_TURN, min_size=1, max_size=3), st.integers(1, 4), st.integers(0, 3),
                   st.none() | _TURN)


def _add(cm: ContextManager, batch: list[dict[str, Any]]) -> None:
    """``cm.add(batch)``, checking that no message of the view is lost or overwritten by it.

    (A result whose call a rewrite took away may go: it is archived, as a result that answers no call.)
    """
    # The stored list, not messages(): reading messages() settles the view, which hid the failure (red team 19).
    before = list(cm._view.raw)
    calls = {c.id for m in before for c in m.tool_calls}
    kept = {str(m.meta["id"]): m.text for m in before
            if "id" in m.meta and (m.role != "tool" or m.tool_call_id in calls)}  # (not the synthetic ones)
    cm.add(batch)
    after = {str(m.meta.get("id")): m for m in cm.messages()}
    for key, text in kept.items():
        assert key in after, key
        if not after[key].meta.get(WIDENED_META):  # (an output put back in its standard view has another text)
            assert after[key].role == "tool" or after[key].text == text, key


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.lists(_ROUND, min_size=1, max_size=3))
def test_random_rewrites_adds_and_prepares(rounds: list[tuple[Any, ...]]) -> None:
    cm = _manager()
    cm.add([{"role": "system", "content": f"system {NONCE}"}])
    calls = itertools.count(1)
    steps = itertools.count()

    def turn(made: int, answered: int, size: int) -> None:
        ids = [f"call_{next(calls)}" for _ in range(made)]
        text = f"turn {next(steps)} {NONCE}"
        batch: list[dict[str, Any]] = [{"role": "assistant", "content": text,
                                        "tool_calls": [_call(i, f"tool{k}") for k, i in enumerate(ids)]}]
        batch += [{"role": "tool", "tool_call_id": i, "content": f"result {i} {NONCE} " * (1 + size)}
                  for i in ids[:answered]]
        _add(cm, batch)
        assert any(m.role == "assistant" and m.text == text for m in cm.messages())

    for turns, start, count, then in rounds:
        for made, answered, size in turns:
            turn(made, answered, size)
        _check_pairing(cm.prepare("openai_chat"))
        if count:
            drop: Callable[[list[Message]], list[Message]] = lambda v: v[:start] + v[start + count:]  # noqa: E731
            cm.rewrite_view(drop, reason="t")
        if then is None:
            text = f"user {next(steps)} {NONCE}"
            _add(cm, [{"role": "user", "content": text}])
            assert any(m.text == text for m in cm.messages())
        else:
            turn(*then)
        _check_pairing(cm.prepare("openai_chat"))
    cm.close()
