"""When a rewrite of the history pays for the prompt cache it invalidates (billing/economics.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.billing import cache_rates
from contextfold.billing.economics import RewriteCase, reusable_head, weigh_rewrite
from contextfold.tokens import get_model

OPENAI = cache_rates("gpt-4o")
ANTHROPIC = cache_rates("claude-sonnet-4")
NONE = cache_rates(get_model("local-model", context_window=16_000))

# A 16K SWE-agent view just over soft: 8,200 tokens, masking frees 1,700, 400 new tokens a call, 10 calls so far.
SOFT_MASKING = RewriteCase(tokens=8_200, freed=1_700, reusable=0, growth_per_turn=400, turns_so_far=10, hard=13_600)


def test_masking_at_soft_pays_at_openai_and_waits_at_anthropic() -> None:
    openai = weigh_rewrite(OPENAI, SOFT_MASKING)
    anthropic = weigh_rewrite(ANTHROPIC, SOFT_MASKING)
    # Horizon: 10 turns (the session's age) before the 13.5 turns until hard.
    assert openai.horizon_turns == anthropic.horizon_turns == 10
    # OpenAI: 0.5 * 8,200 - 1 * 1,700 = 2,400 against 0.5 * 1,700 * 10 = 8,500 saved.
    assert (openai.invalidation_cost, openai.expected_saving, openai.act) == (2_400, 8_500, True)
    # Anthropic: 1.15 * 8,200 - 1.25 * 1,700 = 7,305 against 0.1 * 1,700 * 10 = 1,700 saved.
    assert anthropic.invalidation_cost == pytest.approx(7_305)
    assert anthropic.expected_saving == pytest.approx(1_700)
    assert not anthropic.act
    assert "waits" in anthropic.reason() and "7,305" in anthropic.reason()


def test_the_horizon_ends_where_the_hard_threshold_would_force_the_rewrite() -> None:
    near_hard = RewriteCase(tokens=13_000, freed=1_700, reusable=0, growth_per_turn=400, turns_so_far=50, hard=13_600)
    assert weigh_rewrite(OPENAI, near_hard).horizon_turns == 1.5
    young = RewriteCase(tokens=8_200, freed=1_700, reusable=0, growth_per_turn=400, turns_so_far=0, hard=13_600)
    assert weigh_rewrite(OPENAI, young).horizon_turns == 1  # a session just started: at least its first call
    flat = RewriteCase(tokens=8_200, freed=1_700, reusable=0, growth_per_turn=0, turns_so_far=30, hard=13_600)
    assert weigh_rewrite(ANTHROPIC, flat).horizon_turns == 30


def test_a_long_session_pays_for_a_big_batch_even_at_anthropic() -> None:
    big = RewriteCase(tokens=9_000, freed=6_000, reusable=0, growth_per_turn=150, turns_so_far=40, hard=13_600)
    verdict = weigh_rewrite(ANTHROPIC, big)
    # 1.15 * 9,000 - 1.25 * 6,000 = 2,850 against 0.1 * 6,000 * 30.7 turns.
    assert verdict.act and verdict.invalidation_cost == pytest.approx(2_850)


def test_without_caching_every_rewrite_pays_at_once() -> None:
    verdict = weigh_rewrite(NONE, SOFT_MASKING)
    assert verdict.act and verdict.invalidation_cost == -1_700


def test_the_reusable_head_is_what_each_provider_still_reads() -> None:
    # OpenAI reads any prefix of 1,024 tokens or more; Anthropic only the pinned head's entry.
    assert reusable_head(OPENAI, change_at=5_000, pinned=900) == 5_000
    assert reusable_head(ANTHROPIC, change_at=5_000, pinned=1_250) == 1_250
    assert reusable_head(ANTHROPIC, change_at=5_000, pinned=900) == 0  # under Sonnet's 1,024 minimum
    assert reusable_head(ANTHROPIC, change_at=800, pinned=1_250) == 0  # the change is inside the head
    assert reusable_head(OPENAI, change_at=1_000, pinned=0) == 0
    assert reusable_head(NONE, change_at=5_000, pinned=1_250) == 0
    # A change within the 20 content blocks Anthropic looks back from the last breakpoint finds an earlier entry.
    assert reusable_head(ANTHROPIC, change_at=5_000, pinned=1_250, parts_after=20) == 5_000
    assert reusable_head(ANTHROPIC, change_at=5_000, pinned=1_250, parts_after=21) == 1_250
    assert reusable_head(OPENAI, change_at=5_000, pinned=900, parts_after=500) == 5_000


@settings(max_examples=200, deadline=None)
@given(tokens=st.integers(1_000, 100_000), share=st.floats(0.01, 1.0), reusable_share=st.floats(0, 1),
       growth=st.floats(0, 5_000), turns=st.integers(0, 200))
def test_freeing_more_never_turns_a_paying_rewrite_into_a_wait(tokens: int, share: float, reusable_share: float,
                                                               growth: float, turns: int) -> None:
    hard = tokens * 2
    freed = int(tokens * share)
    case = RewriteCase(tokens, freed, int(tokens * reusable_share), growth, turns, hard)
    more = RewriteCase(tokens, min(tokens, freed + tokens // 10), case.reusable, growth, turns, hard)
    for rates in (OPENAI, ANTHROPIC, NONE):
        if weigh_rewrite(rates, case).act:
            assert weigh_rewrite(rates, more).act
    # A cheaper cache read makes a rewrite pay less often: what pays at Anthropic pays at OpenAI.
    if weigh_rewrite(ANTHROPIC, case).act and case.reusable == 0:
        assert weigh_rewrite(OPENAI, case).act


def test_a_rewrite_that_takes_the_place_of_the_forced_one_pays_even_at_anthropic() -> None:
    # 8,800 tokens, 400 a call: hard (13,600) in 12 calls, within the 20 the session is expected to last. Waiting
    # does not avoid a rewrite then; one that frees enough to stay under hard for those 20 calls replaces it.
    shallow = RewriteCase(tokens=8_800, freed=2_000, reusable=0, growth_per_turn=400, turns_so_far=20, hard=13_600)
    deep = RewriteCase(tokens=8_800, freed=3_300, reusable=0, growth_per_turn=400, turns_so_far=20, hard=13_600)
    # (4,800 + 2,000) / 400 = 17 calls under hard: a second rewrite would still come; the plain weighing waits.
    waits = weigh_rewrite(ANTHROPIC, shallow)
    assert not waits.act and not waits.replaces_forced
    assert waits.expected_saving == pytest.approx(0.1 * 2_000 * 12)
    # (4,800 + 3,300) / 400 = 20.25 calls: it replaces the forced rewrite. Plainly it would wait (0.1 * 3,300 * 12
    # = 3,960 against 1.15 * 8,800 - 1.25 * 3,300 = 5,995); the forced rewrite's larger view is saved too.
    pays = weigh_rewrite(ANTHROPIC, deep)
    assert pays.act and pays.replaces_forced
    assert pays.invalidation_cost == pytest.approx(5_995)
    assert pays.expected_saving == pytest.approx(3_960 + 1.15 * 4_800)
    assert pays.net == pytest.approx(pays.expected_saving)  # it costs nothing the wait would not
    assert "takes the place of the rewrite the hard threshold forces in 12.0 turns" in pays.reason()
    # A session not expected to reach hard (10 calls so far, 12 to hard) has no forced rewrite to replace.
    young = RewriteCase(tokens=8_800, freed=3_300, reusable=0, growth_per_turn=400, turns_so_far=10, hard=13_600)
    assert not weigh_rewrite(ANTHROPIC, young).act
    # Without caching nothing is replaced: every rewrite pays at once anyway.
    assert not weigh_rewrite(NONE, deep).replaces_forced


def test_a_cache_the_provider_has_dropped_costs_nothing_to_rewrite() -> None:
    """Idle longer than the provider's cache lifetime: the next call pays the whole view anyway (written at
    Anthropic, fresh at OpenAI), so a rewrite now invalidates nothing and pays whatever the horizon."""
    idle = RewriteCase(tokens=8_200, freed=1_700, reusable=0, growth_per_turn=400, turns_so_far=10, hard=13_600,
                       idle_s=301.0)
    verdict = weigh_rewrite(ANTHROPIC, idle)
    assert verdict.act and verdict.expired and verdict.invalidated_tokens == 0
    assert verdict.invalidation_cost == pytest.approx(-1.25 * 1_700)  # only the tokens it no longer writes
    assert "the cache expired (idle 301 s, lifetime 300 s)" in verdict.reason()
    # At the lifetime itself the entry is still there (Anthropic refreshes it on use): the usual verdict, a wait.
    assert not weigh_rewrite(ANTHROPIC, RewriteCase(8_200, 1_700, 0, 400, 10, 13_600, idle_s=300.0)).act
    # The 1-hour cache lives longer: ten minutes idle is still warm.
    assert not weigh_rewrite(cache_rates("claude-sonnet-4", ttl="1h"), RewriteCase(8_200, 1_700, 0, 400, 10, 13_600,
                                                                                 idle_s=600.0)).expired
    assert weigh_rewrite(OPENAI, RewriteCase(8_200, 1_700, 5_000, 400, 10, 13_600, idle_s=900.0)).invalidated_tokens \
        == 0
