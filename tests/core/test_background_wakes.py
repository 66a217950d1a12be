"""What a caller can rely on from the background thread and the telemetry thread, and when they are woken.

Relied on (kept from before the wakes were held, issue 22, twelfth session):
- ``_background.wait_idle()``, on any thread, returns once every job submitted before it has run, including a job
  submitted by an agent-facing call still running on another thread (the job still waits up to
  ``JOB_START_WAIT_S`` for the calls in progress, as it did).
- A job submitted during a call starts by itself once the call ends: nobody has to wait for it.
- A job submitted outside any call is started at once; a full queue drops the job (``submit`` returns False).
- Events emitted during a call are exported after the batch delay, and ``flush()`` exports them at once.

Changed: neither thread is woken while an agent-facing call (``with foreground:``) is in progress on the thread
that submits or emits; the wake-up is made as that thread's outermost call ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from contextfold import _background
from contextfold.telemetry import _pace
from contextfold.telemetry._pace import foreground
from contextfold.telemetry.processor import BatchProcessor

PATIENCE_S = 30.0  # (a bound for a broken implementation, never reached by a working one)


@contextmanager
def _wakes_during_calls() -> Iterator[list[str]]:
    """The notifications this thread makes to waiting threads while an agent-facing call is in progress."""
    made: list[str] = []
    me = threading.current_thread()
    notify, notify_all = threading.Condition.notify, threading.Condition.notify_all

    def noted(self: threading.Condition, n: int = 1) -> None:
        if threading.current_thread() is me and _pace._active and getattr(self, "_waiters", None):
            made.append("notify")
        notify(self, n)

    def noted_all(self: threading.Condition) -> None:
        if threading.current_thread() is me and _pace._active and getattr(self, "_waiters", None):
            made.append("notify_all")
        notify_all(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threading.Condition, "notify", noted)
        patch.setattr(threading.Condition, "notify_all", noted_all)
        yield made


class _Collect:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.arrived = threading.Event()

    def export(self, batch: list[dict[str, Any]]) -> None:
        self.events.extend(batch)
        self.arrived.set()


def _nonce() -> str:
    return datetime.now(UTC).strftime("%H%M%S%f")


def test_the_background_thread_is_not_woken_during_a_call_and_starts_the_job_once_it_ends() -> None:
    _background.wait_idle()  # (the thread is started and waiting: a wake-up would have a waiter to reach)
    _background.submit(lambda: None)
    _background.wait_idle()
    ran = threading.Event()
    with _wakes_during_calls() as made:
        with foreground:
            with foreground:  # (a call inside a call: the outermost one's end is what counts)
                assert _background.submit(ran.set)
            assert made == []
        assert made == []
    assert ran.wait(PATIENCE_S)  # started by itself: nothing waited for it


def test_the_telemetry_thread_is_not_woken_during_a_call_and_exports_after_it() -> None:
    exporter = _Collect()
    processor = BatchProcessor(exporter, shared_worker=True, schedule_delay_s=0.01)
    nonce = _nonce()
    with _wakes_during_calls() as made, foreground:
        processor.emit({"name": f"first-{nonce}"})  # (the queue stops being empty: the worker is scheduled)
        processor.emit({"name": f"second-{nonce}"})
        assert made == []
    assert exporter.arrived.wait(PATIENCE_S)  # after the batch delay, without a flush
    assert processor.flush(PATIENCE_S)
    assert [e["name"] for e in exporter.events] == [f"first-{nonce}", f"second-{nonce}"]
    processor.shutdown()


def test_a_flush_during_a_call_exports_at_once() -> None:
    exporter = _Collect()
    processor = BatchProcessor(exporter, shared_worker=True, schedule_delay_s=60.0)
    nonce = _nonce()
    with foreground:
        processor.emit({"name": f"now-{nonce}"})
        assert processor.flush(PATIENCE_S)  # (a flush is asked for now: never held)
    assert [e["name"] for e in exporter.events] == [f"now-{nonce}"]
    processor.shutdown()


def test_wait_idle_on_another_thread_waits_for_a_job_a_call_still_running_submitted() -> None:
    submitted, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def agent() -> None:
        with foreground:
            _background.submit(ran.append, "job")
            submitted.set()
            release.wait(PATIENCE_S)  # (the call goes on until the other thread's wait_idle returned)

    calling = threading.Thread(target=agent)
    calling.start()
    assert submitted.wait(PATIENCE_S)
    waiting = threading.Thread(target=_background.wait_idle)
    waiting.start()
    waiting.join(PATIENCE_S)
    still_waiting = waiting.is_alive()
    call_running = not release.is_set() and calling.is_alive()
    release.set()
    calling.join(PATIENCE_S)
    assert not still_waiting and call_running
    assert ran == ["job"]


def test_a_job_submitted_outside_any_call_starts_at_once() -> None:
    ran = threading.Event()
    assert _background.submit(ran.set)
    assert ran.wait(PATIENCE_S)


def test_a_full_queue_drops_the_job() -> None:
    _background.wait_idle()
    hold, started = threading.Event(), threading.Event()

    def blocking() -> None:
        started.set()
        hold.wait(PATIENCE_S)

    try:
        assert _background.submit(blocking)
        assert started.wait(PATIENCE_S)
        accepted = [_background.submit(lambda: None) for _ in range(_background.MAX_PENDING + 1)]
    finally:
        hold.set()
    _background.wait_idle()
    assert accepted == [True] * _background.MAX_PENDING + [False]
