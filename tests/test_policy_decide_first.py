"""``decide()`` answers the common "nothing to do" first (issue 22: it runs on every ``prepare()``): same plans as
the threshold ladder it short-cuts, for any budgets (soft above hard included) and policy switches."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.compaction import Action, Budgets, Plan, Policy, decide
from contextfold.messages import freeze


def _ladder(tokens: int, message_count: int, tool_output_tokens: int, budgets: Budgets, policy: Any) -> Plan:
    """The ladder as it read before the short cut (the reference)."""
    excess_tool = max(0, tool_output_tokens - budgets.tool_output_budget)
    figures: dict[str, int | float] = {
        "tokens": tokens, "message_count": message_count, "tool_output_tokens": tool_output_tokens,
        "soft": budgets.soft, "hard": budgets.hard, "window": budgets.window,
        "tool_output_budget": budgets.tool_output_budget, "maskable_excess": excess_tool,
        "usage_pct": round(tokens / budgets.window, 4),
    }
    worth_masking = excess_tool > 0 and excess_tool >= policy.clear_at_least

    def plan(action: Action, reason: str) -> Plan:
        return Plan(action, reason, freeze(figures))

    if not policy.enabled:
        return plan(Action.NONE, f"{tokens} tokens, {message_count} messages: compaction is disabled (enabled: false)")
    if message_count >= policy.emergency_message_count:
        figures["target"] = budgets.soft
        if not policy.auto:
            return plan(Action.NONE, f"{message_count} messages reach the cap, but automatic compaction is off")
        return plan(Action.EMERGENCY, f"{message_count} messages reach the cap of {policy.emergency_message_count}")
    for threshold, name, action in ((budgets.hard, "hard", Action.HARD), (budgets.soft, "soft", Action.SOFT)):
        if tokens <= threshold:
            continue
        if worth_masking and tokens - excess_tool <= threshold:
            figures["target"] = threshold
            return plan(Action.MASK, f"{tokens} tokens exceed the {name} threshold {threshold}; masking "
                                     f"{excess_tool} tokens of old tool output is enough")
        figures["target"] = budgets.soft
        if not policy.auto:
            return plan(Action.NONE, f"{tokens} tokens exceed the {name} threshold {threshold}, but automatic "
                                     "compaction is off")
        return plan(action, f"{tokens} tokens exceed the {name} threshold {threshold}")
    if worth_masking:
        figures["target"] = budgets.tool_output_budget
        return plan(Action.MASK, f"tool outputs take {tool_output_tokens} tokens, over their budget of "
                                 f"{budgets.tool_output_budget}")
    return plan(Action.NONE, f"{tokens} tokens are within the soft threshold {budgets.soft}")


_SMALL = st.integers(min_value=0, max_value=2_000)


@settings(max_examples=400, deadline=None)
@given(tokens=_SMALL, count=st.integers(min_value=0, max_value=60), tool=_SMALL, window=st.integers(1, 2_000),
       hard=_SMALL, soft=_SMALL, budget=_SMALL, enabled=st.booleans(), auto=st.booleans(),
       clear_at_least=st.integers(0, 500), cap=st.integers(2, 60))
def test_the_short_cut_gives_the_ladders_plan(tokens: int, count: int, tool: int, window: int, hard: int, soft: int,
                                              budget: int, enabled: bool, auto: bool, clear_at_least: int,
                                              cap: int) -> None:
    budgets = Budgets(window=window, hard=hard, soft=soft, reply_reserve=0, tool_output_budget=budget)
    policy = SimpleNamespace(enabled=enabled, auto=auto, clear_at_least=clear_at_least, emergency_message_count=cap)
    got = decide(tokens, count, tool, budgets, cast(Policy, policy))
    want = _ladder(tokens, count, tool, budgets, policy)
    assert (got.action, got.reason, dict(got.figures)) == (want.action, want.reason, dict(want.figures))
