"""``policy.prompt_cache_ttl``: the prompt cache a session writes, for a caller who records no usage.

Left by the eighteenth stop: a session's rewrites are priced at Anthropic's 1-hour cache only once a recorded usage
report shows 1-hour writes (``cache_creation.ephemeral_1h_input_tokens``); a caller who never calls
``record_usage()`` had no way to say its client marks ``"ttl": "1h"``, and a 6-minute pause made a waiting masking
batch look free ("the cache expired") while the next call wrote the whole view again at 2x. The policy's knob says it
("5m" | "1h"; unset: 5 minutes); a usage report's cache writes, once recorded, still decide.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contextfold import ContextManager
from contextfold.compaction import Policy
from contextfold.errors import ConfigError
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import CacheDecision, RecordingTelemetry

NONCE = "s19g-ttl-7c1e"
OUTPUT = "\n".join(f"{n:4d}  result_{n} = measure({n}) + offset_{n * 3} {NONCE}" for n in range(1, 70))


def _written(prompt: int, ttl: str) -> dict[str, object]:
    """Anthropic's usage of a call that wrote all but 10 tokens of its prompt to the cache of ``ttl``."""
    written = prompt - 10
    one_hour = written if ttl == "1h" else 0
    return {"input_tokens": 10, "cache_creation_input_tokens": written, "cache_read_input_tokens": 0,
            "output_tokens": 5, "cache_creation": {"ephemeral_5m_input_tokens": written - one_hour,
                                                   "ephemeral_1h_input_tokens": one_hour}}


def _paused_masking(policy: dict[str, Any], usage: Callable[[int], dict[str, object]] | None = None
                    ) -> tuple[ContextManager, CacheDecision]:
    """A session at Claude's prices whose masking batch waits, then a 6-minute pause and the next call's verdict.

    ``usage``: each call's usage report, by the prompt's tokens (None: the caller records none).
    """
    now = [datetime(2026, 11, 27, 12, 0, tzinfo=UTC)]
    sink = RecordingTelemetry()
    cm = ContextManager("claude-sonnet-4", max_context_tokens=16_000, store="memory", archive=False, telemetry=sink,
                        message_id_prefix="t", clock=lambda: now[0], policy={"clear_at_least": 1_000, **policy})
    cm.add([Message.system("You are a coding agent."), Message.user(f"measure every module of {NONCE}")])
    for n in range(20):
        now[0] += timedelta(seconds=30)
        cm.add([Message.assistant(f"step {n}", [ToolCall(f"c{n}", "measure", f'{{"module": {n}}}')]),
                Message.tool(f"c{n}", OUTPUT.replace("measure", f"measure{n}"))])
        cm.prepare("anthropic")
        if usage is not None:
            cm.record_usage(usage(cm.tokens()))
        if any(not d.applied for d in sink.of_type(CacheDecision)):
            break
    assert cm.maskings == 0 and cm.tokens() > cm.budgets.soft  # a masking batch waits: it does not pay
    now[0] += timedelta(minutes=6)
    cm.add([Message.user(f"also measure the tests of {NONCE}")])
    cm.prepare("anthropic")
    return cm, sink.of_type(CacheDecision)[-1]


def test_a_caller_recording_no_usage_says_its_cache_is_kept_an_hour() -> None:
    cm, verdict = _paused_masking({"prompt_cache_ttl": "1h"})
    assert cm.maskings == 0  # afa4c7c: no such field (and unset: 1, the pause taken for a dropped cache)
    assert not verdict.applied and "expired" not in verdict.reason and verdict.invalidated_tokens > 0
    assert (cm._economics.rates.ttl, cm._economics.rates.lifetime_s) == ("1h", 3_600.0)


@pytest.mark.parametrize("policy", [{}, {"prompt_cache_ttl": "5m"}])
def test_unset_or_five_minutes_the_pause_drops_the_cache(policy: dict[str, Any]) -> None:
    cm, verdict = _paused_masking(policy)
    assert cm.maskings == 1
    assert "the cache expired (idle 360 s, lifetime 300 s)" in verdict.reason


def test_recorded_usage_still_decides_against_the_policy() -> None:
    cm, verdict = _paused_masking({"prompt_cache_ttl": "1h"}, lambda prompt: _written(prompt, "5m"))
    assert cm.maskings == 1 and "lifetime 300 s" in verdict.reason  # the calls wrote the 5-minute cache
    cm, verdict = _paused_masking({"prompt_cache_ttl": "5m"}, lambda prompt: _written(prompt, "1h"))
    assert cm.maskings == 0 and "expired" not in verdict.reason  # they wrote the 1-hour one


@pytest.mark.parametrize("value", ["2h", "1H", 3600, ""])
def test_a_bad_ttl_is_named(value: object) -> None:
    with pytest.raises(ConfigError, match=r"policy\.prompt_cache_ttl: Input should be '5m' or '1h'"):
        ContextManager("claude-sonnet-4", store="memory", archive=False, policy={"prompt_cache_ttl": value})
    with pytest.raises(ValueError, match="prompt_cache_ttl"):
        Policy(prompt_cache_ttl=value)  # type: ignore[arg-type]
