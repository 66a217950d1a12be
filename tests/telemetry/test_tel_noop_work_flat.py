"""The telemetry thread's work for a no-op ``prepare()`` does not grow with the history (issue 22).

Counted, not timed: the Python calls the processor's thread makes to build, redact and export the events of a run of
no-op calls, on a history of 60 messages and of 3,000. The calls are alike (one user message each, nothing to
compact); only the history behind them differs.
"""

from __future__ import annotations

import threading
from types import FrameType
from typing import Any

from contextfold import ContextManager
from contextfold.compaction import Action
from contextfold.exporters.base import InMemoryExporter
from contextfold.messages import Message
from contextfold.telemetry import BatchProcessor

NONCE = "s20dflat"
CALLS = 40
PATIENCE_S = 30.0  # (a bound on a flush, never reached: only a broken processor takes this long)


class _CallCounter:
    """A profile function counting the Python calls one thread makes while armed."""

    def __init__(self) -> None:
        self.thread: int | None = None
        self.armed = False
        self.calls = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and self.armed and threading.get_ident() == self.thread:
            self.calls += 1


def _worker_calls(history: int) -> int:
    """Python calls on the processor's thread while it exports ``CALLS`` no-op calls' events."""
    counter = _CallCounter()
    threading.setprofile(counter)  # (the processor's thread starts with it: a profile is per thread)
    try:
        processor = BatchProcessor(InMemoryExporter(), schedule_delay_s=3_600)  # (exports only when flushed)
    finally:
        threading.setprofile(None)
    try:
        thread = processor._worker.thread
        assert thread is not None
        counter.thread = thread.ident
        cm = ContextManager("gpt-4o", max_context_tokens=10_000_000, store="memory", archive=False,
                            telemetry=processor, session_id=f"flat-{NONCE}",
                            policy={"emergency_message_count": 1_000_000})
        cm.counter.wait_exact()
        cm.add([Message.user(f"note {n} of the history {NONCE}") for n in range(history)])
        for n in range(3):  # (the first calls' events: their strings learned clean)
            cm.add(Message.user(f"warm-up {n} {NONCE}"))
            cm.prepare()
        assert processor.flush(PATIENCE_S)
        for n in range(CALLS):
            cm.add(Message.user(f"question {n} {NONCE}"))
            cm.prepare()
            assert cm.last_plan is not None and cm.last_plan.action is Action.NONE
        counter.armed = True
        assert processor.flush(PATIENCE_S)
        counter.armed = False
        assert processor.stats().exported > 2 * CALLS
    finally:
        processor.shutdown()
    return counter.calls


def test_the_telemetry_threads_work_per_noop_call_does_not_grow_with_the_history() -> None:
    short, long = _worker_calls(60), _worker_calls(3_000)
    assert short > 0
    # (Nearly equal, not equal: the pacer's waits and an id's one-slot memo depend on scheduling; work that grew
    # with the history would add thousands a call: 3,000 messages, 40 calls.)
    assert long <= short * 1.1, f"{long} calls on the telemetry thread for a history of 3,000, {short} for 60"
