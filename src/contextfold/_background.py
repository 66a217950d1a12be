"""One daemon thread per process for optional work done while the agent waits for its model (cache warming).

Jobs are best effort: a full queue drops new jobs, and nothing waits for them except :func:`wait_idle` (for
benchmarks and tests). Jobs must pace themselves (see :mod:`contextfold.telemetry._pace`) so that the agent's
thread never waits long for the GIL.

A job submitted during an agent-facing call (``prepare()``) is queued at once (:func:`wait_idle` on any thread
waits for it), but the thread is woken only as that call ends (:func:`~contextfold.telemetry._pace.
after_foreground`): it would not start the job before then anyway. A thread busy with an earlier job takes the
next one without being woken.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from .telemetry._pace import after_foreground

__all__ = ["MAX_PENDING", "submit", "wait_idle"]

# A job is a batch of texts of one turn or so; 64 pending batches means the thread is far behind: drop, not grow.
MAX_PENDING = 64

# How long a job waits at most for the agent's calls in progress to end before it starts anyway (calls that never
# pause, a benchmark's loop, must not keep the read-ahead from ever running).
JOB_START_WAIT_S = 0.02

# At interpreter exit, how long the job running then may take to end (the jobs not started are dropped).
EXIT_WAIT_S = 5.0

_Job = tuple[Callable[..., Any] | None, tuple[Any, ...]]

_lock = threading.Lock()  # guards everything below
_jobs: deque[_Job] = deque()  # queued, not started (a None job: the thread ends)
_unfinished = 0  # jobs queued or running
_has_jobs = threading.Condition(_lock)  # the thread waits here while no job is queued
_all_done = threading.Condition(_lock)  # wait_idle() waits here
_wake_held = False  # a job was queued during a call without waking the thread: the call's end wakes it
_start_lock = threading.Lock()
_thread: threading.Thread | None = None
_exiting = False


def submit(job: Callable[..., Any], *args: Any) -> bool:
    """Run ``job(*args)`` on the background thread; False when the queue is full (the job is dropped)."""
    global _thread, _unfinished, _wake_held
    with _start_lock:
        if _exiting:
            return False
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="contextfold-background", daemon=True)
            _thread.start()
    with _lock:
        if len(_jobs) >= MAX_PENDING:
            return False
        _jobs.append((job, args))
        _unfinished += 1
        if _wake_held:
            return True  # (the end of a call in progress wakes the thread)
        if after_foreground(_wake):
            _wake_held = True
            return True
        _has_jobs.notify()
    return True


def _wake() -> None:
    """Wake the thread for the jobs queued during a call (a call's end, or a wait_idle() that cannot wait for it)."""
    global _wake_held
    with _lock:
        if _wake_held:
            _wake_held = False
            _has_jobs.notify()


def wait_idle() -> None:
    """Block until every submitted job has run (a job an agent-facing call in progress submitted included)."""
    _wake()
    with _lock:
        while _unfinished:
            _all_done.wait()


def _run() -> None:
    from .telemetry._pace import wait_for_foreground

    global _unfinished
    while True:
        with _lock:
            while not _jobs:
                _has_jobs.wait()
            job, args = _jobs.popleft()
        try:
            if job is None:  # (the interpreter exits)
                return
            # A job prepare() submits starts once prepare() has returned: woken at once, this thread would take the
            # GIL from the agent's call for up to a switch interval before its first pause (issue 22, masking
            # turns). (Another thread's calls, or a wait_idle() during a call, can wake it before.)
            wait_for_foreground(JOB_START_WAIT_S)
            with contextlib.suppress(Exception):  # best effort: a failed warm-up only means a slower compaction later
                job(*args)
        finally:
            with _lock:
                _unfinished -= 1
                if not _unfinished:
                    _all_done.notify_all()


def _stop_at_exit() -> None:
    """Let the running job end and the thread stop before the interpreter finalizes; drop the jobs not started.

    A daemon thread still running when the interpreter finalizes is ended where it next takes the GIL. Inside a
    native call that released it (the secret scan's automaton, ``ahocorasick-rs``) that ends the whole process:
    "FATAL: exception not rethrown", SIGABRT. A script exiting right after a compaction's read-ahead began aborted
    so (issue 22's 100k bench, 2 runs in 3 once the compaction got faster).
    """
    global _exiting, _unfinished, _wake_held
    with _start_lock:
        _exiting = True
        thread = _thread
    if thread is None or not thread.is_alive():
        return
    with _lock:
        _unfinished -= len(_jobs)
        _jobs.clear()
        _jobs.append((None, ()))
        _unfinished += 1
        _wake_held = False
        _has_jobs.notify()
    thread.join(EXIT_WAIT_S)


atexit.register(_stop_at_exit)
