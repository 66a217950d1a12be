"""One daemon thread per process for optional work done while the agent waits for its model (cache warming).

Jobs are best effort: a full queue drops new jobs, and nothing waits for them except :func:`wait_idle` (for
benchmarks and tests). Jobs must pace themselves (see :mod:`contextfold.telemetry._pace`) so that the agent's
thread never waits long for the GIL.
"""

from __future__ import annotations

import atexit
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_PENDING", "submit", "wait_idle"]

# A job is a batch of texts of one turn or so; 64 pending batches means the thread is far behind: drop, not grow.
MAX_PENDING = 64

# How long a job waits at most for the agent's calls in progress to end before it starts anyway (calls that never
# pause, a benchmark's loop, must not keep the read-ahead from ever running).
JOB_START_WAIT_S = 0.02

# At interpreter exit, how long the job running then may take to end (the jobs not started are dropped).
EXIT_WAIT_S = 5.0

_jobs: queue.Queue[tuple[Callable[..., Any] | None, tuple[Any, ...]]] = queue.Queue(MAX_PENDING)
_start_lock = threading.Lock()
_thread: threading.Thread | None = None
_exiting = False


def submit(job: Callable[..., Any], *args: Any) -> bool:
    """Run ``job(*args)`` on the background thread; False when the queue is full (the job is dropped)."""
    global _thread
    with _start_lock:
        if _exiting:
            return False
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="contextfold-background", daemon=True)
            _thread.start()
    try:
        _jobs.put_nowait((job, args))
    except queue.Full:
        return False
    return True


def wait_idle() -> None:
    """Block until every submitted job has run."""
    _jobs.join()


def _run() -> None:
    from .telemetry._pace import wait_for_foreground

    while True:
        job, args = _jobs.get()
        if job is None:  # (the interpreter exits)
            _jobs.task_done()
            return
        # A job prepare() submits starts once prepare() has returned: woken at once, this thread would take the GIL
        # from the agent's call for up to a switch interval before its first pause (issue 22, masking turns).
        wait_for_foreground(JOB_START_WAIT_S)
        try:
            job(*args)
        except Exception:  # best effort: a failed warm-up only means a slower compaction later
            pass
        finally:
            _jobs.task_done()


def _stop_at_exit() -> None:
    """Let the running job end and the thread stop before the interpreter finalizes; drop the jobs not started.

    A daemon thread still running when the interpreter finalizes is ended where it next takes the GIL. Inside a
    native call that released it (the secret scan's automaton, ``ahocorasick-rs``) that ends the whole process:
    "FATAL: exception not rethrown", SIGABRT. A script exiting right after a compaction's read-ahead began aborted
    so (issue 22's 100k bench, 2 runs in 3 once the compaction got faster).
    """
    global _exiting
    with _start_lock:
        _exiting = True
        thread = _thread
    if thread is None or not thread.is_alive():
        return
    while True:
        try:
            _jobs.get_nowait()
        except queue.Empty:
            break
        _jobs.task_done()
    with contextlib.suppress(queue.Full):  # (a submit raced the drain: the thread ends after those jobs)
        _jobs.put_nowait((None, ()))
    thread.join(EXIT_WAIT_S)


atexit.register(_stop_at_exit)
