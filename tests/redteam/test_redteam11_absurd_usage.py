"""A usage report no accepted request can have does not drive compaction (red team, session 11).

Found by recording absurd reports (a proxy that sums a session's usage, a server that misreports): Anthropic usage
with ``cache_read_input_tokens`` of 10^15, or ``input_tokens`` of 10^15, grounds the manager's count, so it takes its
view for 10^15 tokens (``status().usage_pct`` 5 * 10^11 %) and compacts on every turn (6 compactions in 12 short
turns of a 200K model, each lossy) until ``usage_count_dropped`` fires when nothing is left to compact. A provider that
accepted the request took a prompt within its window: a count above the model's published window (the registry's,
not a configured smaller one, where an undercount is exactly what grounding is for) cannot be of this request.

Fixed (lead): ``ContextManager.record_usage`` sets aside a prompt count above 8x the configured window with a
``usage_implausible`` warning (the factor leaves room for a model whose real window is above the configured one).
"""

from __future__ import annotations

import pytest

from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.telemetry import CompactWarning, RecordingTelemetry

NONCE = "rt11-absurd-usage-51a0"


@pytest.mark.parametrize("usage", [
    {"input_tokens": 5, "output_tokens": 3, "cache_read_input_tokens": 10**15, "cache_creation_input_tokens": 0},
    {"input_tokens": 10**15, "output_tokens": 3},
], ids=["cache_read", "input"])
def test_a_count_above_the_published_window_does_not_make_every_turn_compact(usage: dict[str, int]) -> None:
    events = RecordingTelemetry()
    cm = ContextManager(model="claude-sonnet-4-5", store="memory", session_id=NONCE, telemetry=events)
    for i in range(12):
        cm.add([Message("user", f"{NONCE} question {i} " + "word " * 300)])
        cm.prepare("anthropic")
        cm.record_usage(usage)
        cm.add([Message("assistant", f"{NONCE} answer {i} " + "word " * 200)])
    status = cm.status()
    cm.close()
    assert status.compactions == 0
    assert status.usage_pct < 100
    warned = [e for e in events.events if isinstance(e, CompactWarning) and e.code == "usage_implausible"]
    assert len(warned) == 12 and "1,000,000,000,000,00" in warned[0].message


def test_an_undercount_within_the_bound_still_grounds_the_view() -> None:
    # A configured window below the model's own: the provider's count of a view we undercount is what grounding is for.
    cm = ContextManager(model="claude-sonnet-4-5", max_context_tokens=16_000, store="memory", session_id=NONCE + "-b")
    cm.add([Message("user", f"{NONCE} question " + "word " * 300)])
    cm.prepare("anthropic")
    counted = cm.tokens()
    cm.record_usage({"input_tokens": 3 * counted, "output_tokens": 3})
    assert cm.tokens() == 3 * counted
    cm.close()
