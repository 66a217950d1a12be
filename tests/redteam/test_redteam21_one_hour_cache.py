"""A session writing Anthropic's 1-hour prompt cache keeps it through a 6-minute pause: no rewrite priced as free.

Found by the twenty-first red team (the prompt cache's price). The cache-aware policy prices rewrites at the
5-minute cache: written at 1.25x, dropped after 300 s idle. A client marking ``{"type": "ephemeral", "ttl": "1h"}``
(Claude Code's long sessions, an agent that waits on CI) pays 2x to write and keeps the cache an hour. On 8c274dd a
6-minute pause was taken for a dropped cache ("the cache expired (idle 360 s, lifetime 300 s)"), so the masking
batch that was waiting because it did not pay went ahead as free: the next call wrote the whole view again at 2x,
~15,800 tokens here, to free ~1,000. Anthropic's usage says which cache a call wrote
(``cache_creation.ephemeral_1h_input_tokens``): the session's rewrites are priced at that cache from then on.
"""

from __future__ import annotations

from datetime import datetime

from anthropic_cache_sessions import Usage, anthropic_usage, pause_then_prepare, waiting_masking

from contextfold import ContextManager
from contextfold.telemetry import CacheDecision, RecordingTelemetry

NONCE = "rt21-hour-cache-2f8a"


def _waiting_masking(ttl: str | Usage) -> tuple[ContextManager, RecordingTelemetry, list[datetime]]:
    """A session whose masking batch waits; ``ttl``: each call's cache, or the usage of call n of a prompt's tokens."""
    return waiting_masking(NONCE, (lambda n, prompt: anthropic_usage(prompt, ttl)) if isinstance(ttl, str) else ttl)


def _pause_then_prepare(cm: ContextManager, sink: RecordingTelemetry, now: list[datetime]) -> CacheDecision:
    return pause_then_prepare(cm, sink, now, NONCE)


def test_a_pause_within_the_hour_cache_does_not_make_the_waiting_masking_free() -> None:
    cm, sink, now = _waiting_masking("1h")
    _pause_then_prepare(cm, sink, now)
    assert cm.maskings == 0  # on 8c274dd: 1, priced as free ("the cache expired")
    verdict = [d for d in sink.of_type(CacheDecision) if d.action == "mask"][-1]
    assert not verdict.applied and "expired" not in verdict.reason and verdict.invalidated_tokens > 0


def test_the_five_minute_cache_is_still_taken_for_dropped_after_the_same_pause() -> None:
    cm, sink, now = _waiting_masking("5m")
    verdict = _pause_then_prepare(cm, sink, now)
    assert cm.maskings == 1
    assert "the cache expired (idle 360 s, lifetime 300 s)" in verdict.reason


def test_a_mixed_call_keeps_the_conversation_in_the_five_minute_cache() -> None:
    # Anthropic puts 1-hour breakpoints before 5-minute ones: tools and system (~20 tokens) at 1h, the conversation
    # -- what masking rewrites -- at 5m, dropped by the pause (review of lane T: on 6f68e67 priced at 1h, waits)
    cm, sink, now = _waiting_masking(lambda n, prompt: anthropic_usage(prompt, "5m", one_hour_prefix=20))
    verdict = _pause_then_prepare(cm, sink, now)
    assert cm.maskings == 1, verdict.reason


def test_calls_writing_only_the_five_minute_cache_after_a_one_hour_write_switch_back() -> None:
    cm, sink, now = _waiting_masking(lambda n, prompt: anthropic_usage(prompt, "1h" if n == 0 else "5m"))
    verdict = _pause_then_prepare(cm, sink, now)
    assert cm.maskings == 1, verdict.reason


def test_calls_that_only_read_keep_the_one_hour_cache() -> None:
    def usage(n: int, prompt: int) -> dict[str, object]:
        if n < 2:
            return anthropic_usage(prompt, "1h")
        return {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": prompt - 10,
                "output_tokens": 5, "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}}

    cm, sink, now = _waiting_masking(usage)
    verdict = _pause_then_prepare(cm, sink, now)
    assert cm.maskings == 0 and "expired" not in verdict.reason
