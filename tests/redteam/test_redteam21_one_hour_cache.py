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

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from contextfold import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import CacheDecision, RecordingTelemetry

NONCE = "rt21-hour-cache-2f8a"
OUTPUT = "\n".join(f"{n:4d}  result_{n} = measure({n}) + offset_{n * 3} {NONCE}" for n in range(1, 70))


def _usage(prompt: int, ttl: str, *, one_hour_prefix: int = 0) -> dict[str, object]:
    """Anthropic's usage of a call that wrote the whole prompt to the cache of ``ttl`` but a few fresh tokens.

    ``one_hour_prefix``: of a "5m" call, the tokens of its first part written to the 1-hour cache (a mixed call).
    """
    written = prompt - 10
    one_hour = written if ttl == "1h" else one_hour_prefix
    return {"input_tokens": 10, "cache_creation_input_tokens": written, "cache_read_input_tokens": 0,
            "output_tokens": 5, "cache_creation": {"ephemeral_5m_input_tokens": written - one_hour,
                                                   "ephemeral_1h_input_tokens": one_hour}}


def _waiting_masking(ttl: str | Callable[[int, int], dict[str, object]]
                     ) -> tuple[ContextManager, RecordingTelemetry, list[datetime]]:
    """A session whose masking batch waits; ``ttl``: each call's cache, or the usage of call n of a prompt's tokens."""
    now = [datetime(2026, 11, 27, 12, 0, tzinfo=UTC)]
    sink = RecordingTelemetry()
    cm = ContextManager("claude-sonnet-4", max_context_tokens=16_000, store="memory", archive=False, telemetry=sink,
                        message_id_prefix="t", clock=lambda: now[0], policy={"clear_at_least": 1_000})
    cm.add([Message.system("You are a coding agent."), Message.user(f"measure every module of {NONCE}")])
    for n in range(20):
        now[0] += timedelta(seconds=30)
        cm.add([Message.assistant(f"step {n}", [ToolCall(f"c{n}", "measure", f'{{"module": {n}}}')]),
                Message.tool(f"c{n}", OUTPUT.replace("measure", f"measure{n}"))])
        cm.prepare("anthropic")
        cm.record_usage(_usage(cm.tokens(), ttl) if isinstance(ttl, str) else ttl(n, cm.tokens()))
        if any(not d.applied for d in sink.of_type(CacheDecision)):
            break
    assert cm.maskings == 0 and cm.tokens() > cm.budgets.soft  # a masking batch waits: it does not pay
    return cm, sink, now


def test_a_pause_within_the_hour_cache_does_not_make_the_waiting_masking_free() -> None:
    cm, sink, now = _waiting_masking("1h")
    now[0] += timedelta(minutes=6)
    cm.add([Message.user(f"also measure the tests of {NONCE}")])
    cm.prepare("anthropic")
    assert cm.maskings == 0  # on 8c274dd: 1, priced as free ("the cache expired")
    verdict = [d for d in sink.of_type(CacheDecision) if d.action == "mask"][-1]
    assert not verdict.applied and "expired" not in verdict.reason and verdict.invalidated_tokens > 0


def test_the_five_minute_cache_is_still_taken_for_dropped_after_the_same_pause() -> None:
    cm, sink, now = _waiting_masking("5m")
    now[0] += timedelta(minutes=6)
    cm.add([Message.user(f"also measure the tests of {NONCE}")])
    cm.prepare("anthropic")
    assert cm.maskings == 1
    assert "the cache expired (idle 360 s, lifetime 300 s)" in [d for d in sink.of_type(CacheDecision)][-1].reason


def _pause_then_prepare(cm: ContextManager, sink: RecordingTelemetry, now: list[datetime]) -> CacheDecision:
    now[0] += timedelta(minutes=6)
    cm.add([Message.user(f"also measure the tests of {NONCE}")])
    cm.prepare("anthropic")
    return [d for d in sink.of_type(CacheDecision)][-1]


def test_a_mixed_call_keeps_the_conversation_in_the_five_minute_cache() -> None:
    # Anthropic puts 1-hour breakpoints before 5-minute ones: tools and system (~20 tokens) at 1h, the conversation
    # -- what masking rewrites -- at 5m, dropped by the pause (review of lane T: on 6f68e67 priced at 1h, waits)
    cm, sink, now = _waiting_masking(lambda n, prompt: _usage(prompt, "5m", one_hour_prefix=20))
    verdict = _pause_then_prepare(cm, sink, now)
    assert cm.maskings == 1, verdict.reason


def test_calls_writing_only_the_five_minute_cache_after_a_one_hour_write_switch_back() -> None:
    cm, sink, now = _waiting_masking(lambda n, prompt: _usage(prompt, "1h" if n == 0 else "5m"))
    verdict = _pause_then_prepare(cm, sink, now)
    assert cm.maskings == 1, verdict.reason


def test_calls_that_only_read_keep_the_one_hour_cache() -> None:
    def usage(n: int, prompt: int) -> dict[str, object]:
        if n < 2:
            return _usage(prompt, "1h")
        return {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": prompt - 10,
                "output_tokens": 5, "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}}

    cm, sink, now = _waiting_masking(usage)
    verdict = _pause_then_prepare(cm, sink, now)
    assert cm.maskings == 0 and "expired" not in verdict.reason
