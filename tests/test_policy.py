"""Policy validation, budgets and the cheapest-first decision."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from contextfold.compaction import Action, Budgets, Policy, decide
from contextfold.errors import ConfigError


def _error_fields(exc: ValidationError) -> list[str]:
    return [".".join(str(p) for p in err["loc"]) for err in exc.errors()]


def test_defaults_match_the_issue() -> None:
    p = Policy()
    assert (p.trigger_pct, p.soft_pct, p.emergency_message_count, p.hard_cap_buffer) == (0.85, 0.6, 500, 1_500)
    assert (p.keep_recent_turns, p.keep_tool_io_pairs, p.user_message_budget) == (6, 4, 20_000)
    assert p.roles_never_prune == ("system", "developer")
    assert p.strategy == "task_state" and p.auto is True and p.allow_on_overflow is False
    assert p.tool_output_budget_tokens is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"trigger_pct": 1.5}, "trigger_pct"),
        ({"trigger_pct": 0}, "trigger_pct"),
        ({"soft_pct": 1.2}, "soft_pct"),  # soft above hard
        ({"soft_pct": 1.0}, "soft_pct"),  # soft equal to hard
        ({"keep_recent_turns": -1}, "keep_recent_turns"),
        ({"keep_tool_io_pairs": -2}, "keep_tool_io_pairs"),
        ({"user_message_budget": -5}, "user_message_budget"),
        ({"retain_last_turns": -1}, "retain_last_turns"),
        ({"hard_cap_buffer": -1}, "hard_cap_buffer"),
        ({"summary_max_tokens": 0}, "summary_max_tokens"),
        ({"warn_after_compactions": 0}, "warn_after_compactions"),
        ({"tool_output_budget_tokens": 0}, "tool_output_budget_tokens"),
        ({"strategy": "poetry"}, "strategy"),
        ({"strategy": "custom"}, "custom_prompt"),
        ({"roles_never_prune": ("system", "robot")}, "roles_never_prune.1"),
        ({"protected_tools": ("read", " ")}, "protected_tools"),
        ({"trigger_pctt": 0.5}, "trigger_pctt"),  # unknown keys are rejected, not ignored
    ],
)
def test_invalid_policy_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Policy(**kwargs)  # type: ignore[arg-type]
    assert field in _error_fields(info.value)
    assert field.split(".")[0] in str(info.value)


def test_policy_is_frozen() -> None:
    p = Policy()
    with pytest.raises(ValidationError):
        p.trigger_pct = 0.5


def test_a_value_that_repeats_a_default_in_another_type_is_still_validated_and_coerced() -> None:
    # (A policy of defaults only is not validated: Policy(auto=1) must not slip through as the default True.)
    assert Policy(auto=1).auto is True  # type: ignore[arg-type]
    assert Policy(trigger_pct="0.5").trigger_pct == 0.5  # type: ignore[arg-type]
    assert Policy(protected_tools="todo_write, update_plan").protected_tools == ("todo_write", "update_plan")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Policy(auto="maybe")  # type: ignore[arg-type]


def test_copies_dumps_and_pickles_keep_every_field() -> None:
    p = Policy(trigger_pct=0.7, tools={"bash": {"mask_after_turns": 2}}, summary_directives="keep the ticket ids")
    paused = p.model_copy(update={"auto": False})
    assert paused.auto is False and paused.trigger_pct == 0.7 and p.auto is True
    assert Policy.model_validate(p.model_dump()) == p
    assert p.model_dump(include={"trigger_pct", "tools"}) == {
        "trigger_pct": 0.7, "tools": {"bash": {"max_tokens": None, "keep_whole": None, "never_mask": None,
                                               "mask_after_turns": 2, "summarize": None, "protected": None,
                                               "resource": None}}}
    assert pickle.loads(pickle.dumps(p)) == p and copy.deepcopy(p) == p
    assert Policy.model_construct() == Policy() and list(Policy.model_fields)[:2] == ["trigger_pct", "soft_pct"]


def test_custom_strategy_with_prompt_is_valid() -> None:
    assert Policy(strategy="custom", custom_prompt="Summarize as a haiku").custom_prompt == "Summarize as a haiku"


def test_budgets_for_a_large_window() -> None:
    b = Policy().budgets(200_000)
    assert b == Budgets(window=200_000, hard=170_000, soft=102_000, reply_reserve=1_500, tool_output_budget=50_000)


def test_reply_reserve_caps_hard_threshold() -> None:
    b = Policy(trigger_pct=1.0).budgets(10_000)
    assert b.hard == 10_000 - 1_500


def test_tool_output_budget_clamps_and_override() -> None:
    assert Policy().budgets(1_000_000).tool_output_budget == 60_000
    assert Policy().budgets(128_000).tool_output_budget == 32_000
    # The 20K floor would exceed soft in a small window; soft caps it so masking still comes first.
    small = Policy().budgets(16_000)
    assert small.tool_output_budget == small.soft < 20_000
    assert Policy(tool_output_budget_tokens=7_000).budgets(16_000).tool_output_budget == 7_000


def test_reply_reserve_is_at_most_a_fifth_of_a_small_window() -> None:
    # 1,500 tokens were 37% of a 4K window; a fifth (800) still holds a tool call or a paragraph.
    assert Policy().budgets(4_000).reply_reserve == 800
    assert Policy().budgets(4_000).hard == 3_200
    assert Policy().budgets(7_500).reply_reserve == 1_500
    assert Policy().budgets(16_000).hard == 13_600
    assert Policy(reply_reserve_max_pct=1.0).budgets(4_000).hard == 2_500


def test_budgets_reject_a_window_smaller_than_the_reply_reserve() -> None:
    with pytest.raises(ConfigError, match="hard_cap_buffer"):
        Policy(reply_reserve_max_pct=1.0).budgets(1_000)
    with pytest.raises(ConfigError, match="window"):
        Policy().budgets(0)


@settings(max_examples=200, deadline=None)
@given(window=st.integers(2_000, 2_000_000), trigger=st.floats(0.05, 1.0), soft=st.floats(0.05, 0.99))
def test_budgets_are_ordered(window: int, trigger: float, soft: float) -> None:
    b = Policy(trigger_pct=trigger, soft_pct=soft, hard_cap_buffer=1_000).budgets(window)
    assert 0 <= b.soft <= b.hard <= window - b.reply_reserve
    assert b.tool_output_budget <= max(b.soft, 1) or b.tool_output_budget == 0


# -- decide ------------------------------------------------------------------------------------------------------

POLICY = Policy(clear_at_least=1_000)
BUDGETS = POLICY.budgets(100_000)  # hard 85,000 · soft 51,000 · tool outputs 25,000


def test_decide_under_soft_does_nothing() -> None:
    plan = decide(10_000, 20, 5_000, BUDGETS, POLICY)
    assert plan.action is Action.NONE
    assert plan.figures["tokens"] == 10_000 and plan.figures["soft"] == BUDGETS.soft


def test_decide_masks_tool_outputs_over_their_budget() -> None:
    plan = decide(40_000, 20, 30_000, BUDGETS, POLICY)
    assert plan.action is Action.MASK
    assert plan.figures["maskable_excess"] == 5_000


def test_decide_ignores_a_masking_gain_below_clear_at_least() -> None:
    assert decide(40_000, 20, 25_500, BUDGETS, POLICY).action is Action.NONE


def test_decide_prefers_masking_when_it_is_enough_over_soft() -> None:
    # 60K is over soft (51K); masking frees 10K (35K - 25K) which brings it to 50K.
    assert decide(60_000, 20, 35_000, BUDGETS, POLICY).action is Action.MASK


def test_decide_soft_when_masking_is_not_enough() -> None:
    plan = decide(60_000, 20, 26_000, BUDGETS, POLICY)
    assert plan.action is Action.SOFT
    assert "soft threshold" in plan.reason


def test_decide_hard_over_hard_threshold() -> None:
    plan = decide(90_000, 20, 10_000, BUDGETS, POLICY)
    assert plan.action is Action.HARD
    assert plan.figures["target"] == BUDGETS.soft


def test_decide_masks_over_hard_when_that_is_enough() -> None:
    assert decide(90_000, 20, 40_000, BUDGETS, POLICY).action is Action.MASK


def test_decide_emergency_at_message_cap() -> None:
    assert decide(1_000, 500, 0, BUDGETS, POLICY).action is Action.EMERGENCY
    assert decide(1_000, 499, 0, BUDGETS, POLICY).action is Action.NONE


def test_auto_off_never_compacts_but_still_masks() -> None:
    off = Policy(auto=False, clear_at_least=1_000)
    assert decide(90_000, 20, 10_000, BUDGETS, off).action is Action.NONE
    assert "off" in decide(90_000, 20, 10_000, BUDGETS, off).reason
    assert decide(1_000, 900, 0, BUDGETS, off).action is Action.NONE
    assert decide(40_000, 20, 30_000, BUDGETS, off).action is Action.MASK


def test_enabled_off_never_masks_nor_compacts_even_on_overflow() -> None:
    # 001 §2.5: `enabled: false` turns compaction off entirely; `auto: false` alone still masks.
    off = Policy(enabled=False, clear_at_least=1_000)
    for tokens, count, tool in ((90_000, 20, 10_000), (1_000, 900, 0), (40_000, 20, 30_000), (200_000, 5, 0)):
        plan = decide(tokens, count, tool, BUDGETS, off)
        assert plan.action is Action.NONE and "disabled" in plan.reason
    assert not off.may_compact_on_overflow
    assert not Policy(enabled=False, allow_on_overflow=True).may_compact_on_overflow
    assert Policy(auto=False, allow_on_overflow=True).may_compact_on_overflow and Policy().may_compact_on_overflow


def test_enabled_off_in_a_manager_sends_the_history_as_it_is_and_recovery_gives_up() -> None:
    from contextfold.errors import RecoveryFailed
    from contextfold.manager import ContextManager
    from contextfold.messages import Message
    from contextfold.recovery import call_with_recovery

    cm = ContextManager("gpt-4o", max_context_tokens=4_000, store="memory", archive="memory",
                        policy=Policy(enabled=False))
    try:
        cm.add([Message.user(f"request {i} " + "words " * 120) for i in range(30)])
        before = cm.messages()
        assert cm.tokens() > cm.budgets.hard
        cm.prepare()
        assert cm.messages() == before and cm.compactions == 0 and cm.maskings == 0

        def overflowing(view: object) -> object:
            raise RuntimeError("This model's maximum context length is 4000 tokens. However, your messages "
                               "resulted in 9000 tokens. (context_length_exceeded)")

        with pytest.raises(RecoveryFailed, match="enabled=False"):
            call_with_recovery(cm, overflowing)
        assert cm.compact().compacted > 0  # a manual compact still works
    finally:
        cm.close()


def test_decide_rejects_negative_figures() -> None:
    with pytest.raises(ConfigError, match="tool_output_tokens"):
        decide(10, 1, -1, BUDGETS, POLICY)


_ORDER = [Action.NONE, Action.MASK, Action.SOFT, Action.HARD]


@settings(max_examples=300, deadline=None)
@given(tokens=st.integers(0, 200_000), tools=st.integers(0, 200_000), count=st.integers(0, 499))
def test_decide_is_cheapest_sufficient(tokens: int, tools: int, count: int) -> None:
    tools = min(tools, tokens)
    plan = decide(tokens, count, tools, BUDGETS, POLICY)
    if tokens <= BUDGETS.soft:
        assert plan.action in (Action.NONE, Action.MASK)
    elif plan.action is Action.MASK:
        # masking is only chosen when it alone gets the view under the threshold crossed
        excess = tools - BUDGETS.tool_output_budget
        assert excess >= POLICY.clear_at_least
        assert tokens - excess <= (BUDGETS.hard if tokens > BUDGETS.hard else BUDGETS.soft)
    else:
        assert plan.action is (Action.HARD if tokens > BUDGETS.hard else Action.SOFT)
    # more tokens never means a cheaper compaction
    bigger = decide(tokens + 50_000, count, tools, BUDGETS, POLICY)
    if plan.action in (Action.SOFT, Action.HARD):
        assert _ORDER.index(bigger.action) >= _ORDER.index(plan.action)
