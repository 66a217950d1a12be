"""A session at Claude's prompt-cache prices whose masking batch waits, and Anthropic's usage of its calls.

Shared by the tests of which cache a session's rewrites are priced at (5 minutes or 1 hour): the usage its calls
report (``cache_creation``), the policy's ``prompt_cache_ttl``, and a pause of 6 minutes between two calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from contextfold import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import CacheDecision, RecordingTelemetry

Usage = Callable[[int, int], dict[str, object]]  # call n, the prompt's tokens -> that call's usage report


def anthropic_usage(prompt: int, ttl: str, *, one_hour_prefix: int = 0) -> dict[str, object]:
    """Anthropic's usage of a call that wrote the whole prompt to the cache of ``ttl`` but a few fresh tokens.

    ``one_hour_prefix``: of a "5m" call, the tokens of its first part written to the 1-hour cache (a mixed call).
    """
    written = prompt - 10
    one_hour = written if ttl == "1h" else one_hour_prefix
    return {"input_tokens": 10, "cache_creation_input_tokens": written, "cache_read_input_tokens": 0,
            "output_tokens": 5, "cache_creation": {"ephemeral_5m_input_tokens": written - one_hour,
                                                   "ephemeral_1h_input_tokens": one_hour}}


def waiting_masking(nonce: str, usage: Usage | None, policy: Mapping[str, Any] | None = None,
                    ) -> tuple[ContextManager, RecordingTelemetry, list[datetime]]:
    """A session whose masking batch waits (it does not pay), calls 30 s apart; its sink and its clock's reading.

    ``usage``: each call's usage report (None: the caller records none); ``policy``: fields besides
    ``clear_at_least``.
    """
    now = [datetime(2026, 11, 27, 12, 0, tzinfo=UTC)]
    sink = RecordingTelemetry()
    output = "\n".join(f"{n:4d}  result_{n} = measure({n}) + offset_{n * 3} {nonce}" for n in range(1, 70))
    cm = ContextManager("claude-sonnet-4", max_context_tokens=16_000, store="memory", archive=False, telemetry=sink,
                        message_id_prefix="t", clock=lambda: now[0],
                        policy={"clear_at_least": 1_000, **(policy or {})})
    cm.add([Message.system("You are a coding agent."), Message.user(f"measure every module of {nonce}")])
    for n in range(20):
        now[0] += timedelta(seconds=30)
        cm.add([Message.assistant(f"step {n}", [ToolCall(f"c{n}", "measure", f'{{"module": {n}}}')]),
                Message.tool(f"c{n}", output.replace("measure", f"measure{n}"))])
        cm.prepare("anthropic")
        if usage is not None:
            cm.record_usage(usage(n, cm.tokens()))
        if any(not d.applied for d in sink.of_type(CacheDecision)):
            break
    assert cm.maskings == 0 and cm.tokens() > cm.budgets.soft  # a masking batch waits: it does not pay
    return cm, sink, now


def pause_then_prepare(cm: ContextManager, sink: RecordingTelemetry, now: list[datetime], nonce: str,
                       ) -> CacheDecision:
    """Six minutes idle, a new user message and the next call: that call's last cache decision."""
    now[0] += timedelta(minutes=6)
    cm.add([Message.user(f"also measure the tests of {nonce}")])
    cm.prepare("anthropic")
    return sink.of_type(CacheDecision)[-1]
