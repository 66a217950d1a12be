"""Background threads stand aside while an agent-facing call runs (issue 15, p99), and ids cost no system call.

Timing itself is measured in bench/bench_p99.py (a test of how long a tick waits would race the machine's load);
here: the foreground marker's state around the manager's calls, that a pacer told not to defer does not wait (an
overflowing event queue must drain), and the ids.
"""

from __future__ import annotations

import threading

import pytest

from contextfold.manager import ContextManager
from contextfold.telemetry import _pace
from contextfold.telemetry._clock import new_span_id, new_trace_id


def test_the_foreground_marker_nests_and_clears() -> None:
    assert not _pace._active and _pace._idle.is_set()
    with _pace.foreground:
        with _pace.foreground:
            assert len(_pace._active) == 2 and not _pace._idle.is_set()
        assert not _pace._idle.is_set()
    assert not _pace._active and _pace._idle.is_set()


def test_a_call_entering_while_another_leaves_keeps_the_marker_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    # The interleaving a review found, made deterministic: call A leaves, sees no call left, and before A sets the
    # idle event call B (another thread) enters and clears it; A's set then said "idle" while B ran, and every
    # background wait spun on an event already set (up to 20 ms, holding the GIL between checks).
    class EnteredBeforeSet(threading.Event):
        armed = False

        def set(self) -> None:
            if self.armed:
                self.armed = False
                _pace.foreground.__enter__()  # B, between A's check and A's set
            super().set()

    idle = EnteredBeforeSet()
    idle.set()
    monkeypatch.setattr(_pace, "_idle", idle)
    _pace.foreground.__enter__()  # A
    idle.armed = True
    _pace.foreground.__exit__(None, None, None)  # A leaves; B enters inside
    try:
        assert _pace._active == [1] and not idle.is_set()  # B runs: not idle
    finally:
        _pace.foreground.__exit__(None, None, None)  # B leaves
    assert not _pace._active and idle.is_set()


def test_a_pacer_that_must_not_defer_works_through_the_foreground() -> None:
    with _pace.foreground:
        pacer = _pace.GilPacer(defer=False)
        pacer.tick()  # returns at once: an overflowing queue drains whatever the agent does
    assert _pace._idle.is_set()


def test_manager_calls_are_foreground_calls_and_leave_it_idle() -> None:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="pace")
    cm.add([{"role": "user", "content": "hi"}])
    cm.prepare()
    cm.record_usage({"prompt_tokens": 10, "completion_tokens": 2})
    assert not _pace._active and _pace._idle.is_set()
    cm.close()


def test_ids_are_w3c_sized_hex_and_distinct() -> None:
    traces = {new_trace_id() for _ in range(1_000)}
    spans = {new_span_id() for _ in range(1_000)}
    assert len(traces) == len(spans) == 1_000
    assert all(len(t) == 32 and int(t, 16) > 0 for t in traces)
    assert all(len(s) == 16 and int(s, 16) > 0 for s in spans)
