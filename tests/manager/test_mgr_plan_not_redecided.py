"""The policy decides again only when what it reads changed (issue 22, eighteenth session, lane N).

A check point (``add()`` of tool results) and the ``prepare()`` right after it, or two calls on one view, decided
twice on the same figures. Fails on 08dd6b2: every call decided.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import compaction
from contextfold.compaction import Action, Policy, policy
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall

NONCE = "pd7k2"


def _decided(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The reasons of the plans ``decide()`` makes from now on (it makes one per decision)."""
    made: list[str] = []
    real = policy.Plan

    def counted(action: Action, reason: str, *args: object) -> compaction.Plan:
        made.append(reason)
        return real(action, reason, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(policy, "Plan", counted)  # (read by decide() as a global of its module)
    return made


def _manager() -> ContextManager:
    cm = ContextManager("gpt-4o", max_context_tokens=200_000, store="memory", archive="memory",
                        session_id=f"plan-{NONCE}")
    cm.add(Message.user(f"{NONCE} fix the parser"))
    return cm


def _add_a_tool_result(cm: ContextManager) -> None:
    """A call and its result: add() checks after tool results (a check point)."""
    cm.add([Message.assistant("", [ToolCall("c1", "bash", '{"cmd": "ls"}')]),
            Message.tool("c1", f"{NONCE} parser.py tokenizer.py")])


def test_two_calls_on_one_view_decide_once(monkeypatch: pytest.MonkeyPatch) -> None:
    cm = _manager()
    decided = _decided(monkeypatch)
    first = cm.prepare()
    plan = cm.last_plan
    assert cm.prepare() == first
    assert cm.last_plan is plan and plan is not None and plan.action is Action.NONE
    assert len(decided) == 1


def test_a_check_point_and_the_call_after_it_decide_once(monkeypatch: pytest.MonkeyPatch) -> None:
    cm = _manager()
    cm.prepare()
    decided = _decided(monkeypatch)
    _add_a_tool_result(cm)
    cm.prepare()
    assert len(decided) == 1


def test_a_new_message_is_decided_on(monkeypatch: pytest.MonkeyPatch) -> None:
    cm = _manager()
    cm.prepare()
    decided = _decided(monkeypatch)
    before = cm.last_plan
    cm.add(Message.assistant(f"{NONCE} looking"))
    cm.prepare()
    assert len(decided) == 1 and cm.last_plan is not before
    assert cm.last_plan is not None and cm.last_plan.figures["tokens"] > before.figures["tokens"]  # type: ignore[union-attr]


def test_a_paused_session_decides_once_per_view(monkeypatch: pytest.MonkeyPatch) -> None:
    # While the circuit breaker holds compaction paused, the policy in force is a copy with auto off: one per call
    # made every decision look new (afa4c7c: 3 decisions, the check point, the call after it and the next call).
    cm = _manager()
    cm.prepare()
    cm.paused = True
    decided = _decided(monkeypatch)
    _add_a_tool_result(cm)
    cm.prepare()
    plan = cm.last_plan
    cm.prepare()
    assert len(decided) == 1 and cm.last_plan is plan
    in_force = cm._effective_policy()
    assert in_force.auto is False and in_force == cm.policy.model_copy(update={"auto": False})


def test_the_paused_policy_follows_the_policy_and_the_breaker() -> None:
    cm = _manager()
    cm.paused = True
    first = cm._effective_policy()
    assert cm._effective_policy() is first and not first.auto
    cm.policy = Policy(clear_at_least=7)  # (a new policy set on the manager: its own paused copy)
    assert cm._effective_policy() == Policy(clear_at_least=7, auto=False)
    cm.paused = False
    assert cm._effective_policy() is cm.policy
    cm.policy = Policy(auto=False)
    cm.paused = True
    assert cm._effective_policy() is cm.policy  # (auto off already: no copy)


_POLICIES = (Policy(), Policy(clear_at_least=10, tool_output_budget_tokens=50), Policy(enabled=False),
             Policy(auto=False, emergency_message_count=5))
_BUDGETS = [p.budgets(window) for p in _POLICIES for window in (4_000, 16_000)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20_000), st.integers(0, 12), st.integers(0, 8_000),
                          st.sampled_from(range(len(_BUDGETS))), st.sampled_from(range(len(_POLICIES)))),
                min_size=1, max_size=12))
def test_the_kept_plan_is_the_one_decide_makes(calls: list[tuple[int, int, int, int, int]]) -> None:
    from contextfold.manager._decisions import Decisions  # (here: the other tests fail on 08dd6b2 by their asserts)

    decisions = Decisions()
    for total, count, tool, budgets, chosen in calls:
        args = (total, count, tool, _BUDGETS[budgets], _POLICIES[chosen])
        assert decisions.decide(*args) == compaction.decide(*args)
