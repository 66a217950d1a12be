"""``policy.prompt_cache_ttl``: the prompt cache a session writes, for a caller who records no usage.

Left by the eighteenth stop: a session's rewrites are priced at Anthropic's 1-hour cache only once a recorded usage
report shows 1-hour writes (``cache_creation.ephemeral_1h_input_tokens``); a caller who never calls
``record_usage()`` had no way to say its client marks ``"ttl": "1h"``, and a 6-minute pause made a waiting masking
batch look free ("the cache expired") while the next call wrote the whole view again at 2x. The policy's knob says it
("5m" | "1h"; unset: 5 minutes); a usage report's cache writes, once recorded, still decide.
"""

from __future__ import annotations

from typing import Any

import pytest
from anthropic_cache_sessions import Usage, anthropic_usage, pause_then_prepare, waiting_masking

from contextfold import ContextManager
from contextfold.compaction import Policy
from contextfold.errors import ConfigError
from contextfold.telemetry import CacheDecision

NONCE = "s19g-ttl-7c1e"


def _paused_masking(policy: dict[str, Any], usage: Usage | None = None) -> tuple[ContextManager, CacheDecision]:
    """A session at Claude's prices whose masking batch waits, then a 6-minute pause and the next call's verdict."""
    cm, sink, now = waiting_masking(NONCE, usage, policy)
    return cm, pause_then_prepare(cm, sink, now, NONCE)


def _written(ttl: str) -> Usage:
    """Each call's usage: it wrote its prompt to the cache of ``ttl``."""
    return lambda n, prompt: anthropic_usage(prompt, ttl)


def test_a_caller_recording_no_usage_says_its_cache_is_kept_an_hour() -> None:
    cm, verdict = _paused_masking({"prompt_cache_ttl": "1h"})
    assert cm.maskings == 0  # afa4c7c: no such field (and unset: 1, the pause taken for a dropped cache)
    assert not verdict.applied and "expired" not in verdict.reason and verdict.invalidated_tokens > 0
    assert (cm._economics.rates.ttl, cm._economics.rates.lifetime_s) == ("1h", 3_600.0)
    assert verdict.ttl == "1h"  # s19g: no such field (the event did not say which cache priced it)


@pytest.mark.parametrize("policy", [{}, {"prompt_cache_ttl": "5m"}])
def test_unset_or_five_minutes_the_pause_drops_the_cache(policy: dict[str, Any]) -> None:
    cm, verdict = _paused_masking(policy)
    assert cm.maskings == 1
    assert "the cache expired (idle 360 s, lifetime 300 s)" in verdict.reason and verdict.ttl == "5m"


def test_recorded_usage_still_decides_against_the_policy() -> None:
    cm, verdict = _paused_masking({"prompt_cache_ttl": "1h"}, _written("5m"))
    assert cm.maskings == 1 and "lifetime 300 s" in verdict.reason  # the calls wrote the 5-minute cache
    cm, verdict = _paused_masking({"prompt_cache_ttl": "5m"}, _written("1h"))
    assert cm.maskings == 0 and "expired" not in verdict.reason  # they wrote the 1-hour one


@pytest.mark.parametrize("value", ["2h", "1H", 3600, ""])
def test_a_bad_ttl_is_named(value: object) -> None:
    with pytest.raises(ConfigError, match=r"policy\.prompt_cache_ttl: Input should be '5m' or '1h'"):
        ContextManager("claude-sonnet-4", store="memory", archive=False, policy={"prompt_cache_ttl": value})
    with pytest.raises(ValueError, match="prompt_cache_ttl"):
        Policy(prompt_cache_ttl=value)  # type: ignore[arg-type]


def test_a_policy_set_on_the_manager_later_prices_the_next_verdict() -> None:
    # Left by lane s19g: the cache economics read prompt_cache_ttl once, when built; the thresholds follow the policy
    # in force, and so do the prices and the switch now.
    cm, sink, now = waiting_masking(NONCE, None, {})
    assert cm._economics.rates.ttl == "5m"
    cm.policy = cm.policy.model_copy(update={"prompt_cache_ttl": "1h"})
    verdict = pause_then_prepare(cm, sink, now, NONCE)
    assert cm.maskings == 0 and "expired" not in verdict.reason  # s19g: 1, priced at the 5-minute cache
    assert verdict.ttl == "1h"
    assert (cm._economics.rates.ttl, cm._economics.rates.lifetime_s) == ("1h", 3_600.0)
    cm.policy = cm.policy.model_copy(update={"cache_aware": False})
    assert not cm._economics.enabled
