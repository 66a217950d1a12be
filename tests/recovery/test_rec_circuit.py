"""The circuit breaker: three failed compactions in a row pause automatic compaction, two or interrupted do not."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from _rec_history import history, manager

from contextfold.compaction import Policy
from contextfold.errors import SummarizerError
from contextfold.manager import ContextManager
from contextfold.recovery import call_with_recovery
from contextfold.telemetry import RecordingTelemetry, RecoveryCircuitOpen, RecoveryRetry
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.summarizer import ScriptedSummarizer
from contextfold.testing.wire import ErrorReply

FAIL = SummarizerError("the summarizer's endpoint is down")
OK = "<summary>the agent read files f0..fN</summary>"
OVERFLOW = ErrorReply("context_overflow", message="Your input exceeds the context window of this model.")


def rounds(tmp_path: Path, script: list[object]) -> tuple[ContextManager, RecordingTelemetry, ScriptedSummarizer]:
    """One overflow per round, each recovered; the summarizer answers ``script`` in order."""
    summarizer = ScriptedSummarizer(script)  # type: ignore[arg-type]
    cm, events = manager(tmp_path, summarizer=summarizer, policy=Policy(keep_recent_turns=2, keep_tool_io_pairs=2))
    with ScriptedLLMServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        for k in range(len(script) + 1):
            # Each overflow teaches a limit that prepare() would then compact under on its own (with this failing
            # summarizer, raising): forgotten, so that every round's compaction is recovery's.
            cm.forget_learned_limit()
            cm.add(history(8, start=8 * k))
            server.push(OVERFLOW, "ok")
            reply = call_with_recovery(cm, lambda v: client.chat.completions.create(model="m", messages=v))
            assert reply.choices[0].message.content == "ok"
    return cm, events, summarizer


def test_three_failures_in_a_row_open_the_circuit(tmp_path: Path) -> None:
    cm, events, summarizer = rounds(tmp_path, [FAIL, FAIL, FAIL])
    opened, = events.of_type(RecoveryCircuitOpen)
    assert opened.failures == 3 and "paused" in opened.reason
    assert cm.paused and cm.status().paused
    actions = [e.action for e in events.of_type(RecoveryRetry)]
    assert all(a.startswith("compaction_failed:SummarizerError+drop_oldest:") for a in actions[:3])
    # the round after: no summary is attempted any more, recovery only drops old turns
    assert actions[3].startswith("compaction_paused+drop_oldest:")
    assert len(summarizer.requests) == 3


@pytest.mark.parametrize("script", [[FAIL, FAIL], [FAIL, FAIL, OK, FAIL, FAIL], [FAIL, OK, FAIL, FAIL, OK]],
                         ids=["two", "separated", "interleaved"])
def test_the_circuit_stays_closed(tmp_path: Path, script: list[object]) -> None:
    cm, events, summarizer = rounds(tmp_path, script)
    assert not events.of_type(RecoveryCircuitOpen)
    assert not cm.paused
    assert len(summarizer.requests) == len(script) + 1  # still compacting
