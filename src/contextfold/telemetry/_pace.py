"""Background threads that give the GIL back often, so that the agent's thread never waits long for it.

CPython hands the GIL from a busy thread to a waiting one only after the switch interval (5 ms), so a telemetry
thread redacting and serializing a batch of events holds up every ``prepare()`` that falls into the batch by up to
5 ms per handover (the ~20 ms p99 of issue 15). A thread that works in short slices and sleeps briefly between
them (a real sleep: ``sleep(0)`` gives the GIL back, but takes it again before a waiter wakes) bounds that wait
by the slice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["FOREGROUND_WAIT_S", "PAUSE_S", "READ_AHEAD_SLICE_S", "SLICE_S", "GilPacer", "after_foreground",
           "foreground", "wait_for_foreground"]

# Work at most this long before pausing: an agent's prepare() is ~0.2 ms, so 0.5 ms keeps its p99 under 1 ms.
SLICE_S = 0.0005
# The background read-ahead works this long before pausing: it runs while the agent waits for its model (seconds),
# and a turn's job is ~0.7 ms of CPU in the lm32b loop, so most jobs never pause; the agent's thread, back from the
# model in the middle of a long job (a session's first batch), waits for the GIL up to this long, against the
# interpreter's own 5 ms switch interval. Each pause is a sleep of PAUSE_S, ~40-65 us of the thread's CPU (the
# switch out and back, more at high load): 0.5 ms slices paused 1,552 times in the lm32b loop at 16K (issue 22:
# ~8% of the read-ahead at load 8). A call that starts (add(), prepare()) makes the next tick wait, as with any slice.
READ_AHEAD_SLICE_S = 0.002
# Long enough for a thread waiting on the GIL to wake up and take it; short enough to cost the worker little
# (a fifth of its throughput at worst, which the batch processor's queue absorbs).
PAUSE_S = 0.0001


# While an agent-facing call runs (add(), prepare(), record_usage()), background work stands aside: that call gives
# the GIL away whenever it enters C code that releases it (the tokenizer, a lock, a system call), and a background
# thread that took it would keep it for the rest of its slice. A tick then waits for the calls to end, at most this
# long; calls that never pause (a benchmark's loop) get one slice of background work after each such wait.
FOREGROUND_WAIT_S = 0.002
_active: list[int] = []  # one entry per call in the foreground (list.append / pop are atomic under the GIL)
_idle = threading.Event()
_idle.set()


class _ThreadCalls(threading.local):
    """This thread's agent-facing calls in progress, and the wake-ups of other threads held until they end."""

    depth = 0
    wakes: list[Callable[[], object]] | None = None


_calls = _ThreadCalls()


class _Foreground:
    """``with foreground:`` marks an agent-facing call: background threads pause at their next tick until it ends."""

    def __enter__(self) -> None:
        _active.append(1)
        _idle.clear()
        _calls.depth += 1

    def __exit__(self, *exc: object) -> None:
        calls = _calls
        calls.depth -= 1
        _active.pop()
        if not _active:
            _idle.set()
            if _active:
                # A call on another thread entered between the check and the set: it runs, so not idle (set, the
                # event made background waits spin until their deadline).
                _idle.clear()
        if not calls.depth and calls.wakes is not None:
            wakes, calls.wakes = calls.wakes, None
            for wake in wakes:
                wake()


foreground = _Foreground()  # (one object for every call: it holds no state of its own)


def after_foreground(wake: Callable[[], object]) -> bool:
    """Hold ``wake`` (a wake-up of another thread) until this thread's outermost agent-facing call ends.

    False when no call is in progress on this thread: the caller wakes the other thread itself, at once. A thread
    woken in the middle of a call has nothing to do before the call ends (the background jobs and the telemetry
    thread stand aside for it), yet it wants the GIL: it takes it whenever the call lets it go (a contended lock, a
    system call), or asks for it once the call has held it a switch interval (5 ms of wall time: a call the system
    switched out), and the call then waits to get it back in the middle of its work (issue 22: the masking turns of
    the lm32b loop whose thread waited so cost 1.7-2.3 ms of CPU against a median of 1.2-1.3). The held wake-ups are
    made by the call's own thread as its outermost call ends, whatever happens on other threads, so none is lost or
    delayed beyond the call. ``wake`` must not raise.
    """
    calls = _calls
    if not calls.depth:
        return False
    if calls.wakes is None:
        calls.wakes = [wake]
    elif wake not in calls.wakes:  # (one wake-up of a thread per call is enough)
        calls.wakes.append(wake)
    return True


def wait_for_foreground(limit_s: float) -> None:
    """Wait (without the GIL) until no agent-facing call is in progress, for ``limit_s`` at most."""
    deadline = time.perf_counter() + limit_s
    while _active:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        _idle.wait(left)


class GilPacer:
    """Call :meth:`tick` between units of work; it sleeps briefly once a slice of work is used up."""

    def __init__(self, slice_s: float = SLICE_S, pause_s: float = PAUSE_S, *, defer: bool = True) -> None:
        """``defer=False``: keep working in slices while the foreground is busy (a backlog about to overflow)."""
        self.slice_s = slice_s
        self.pause_s = pause_s
        self.defer = defer
        self._started = time.perf_counter()
        self._free_until = 0.0  # until then, work on even while the foreground is busy

    def tick(self) -> None:
        """Pause (giving the GIL to any waiting thread) when the current slice is used up."""
        if _active and self.defer and time.perf_counter() >= self._free_until:
            # Again after each wake-up: in a tight loop of calls the next one starts before this thread gets the GIL.
            deadline = time.perf_counter() + FOREGROUND_WAIT_S
            while _active:
                left = deadline - time.perf_counter()
                if left <= 0:
                    # Calls without a pause: work one slice whatever they do, so that the backlog still drains.
                    self._free_until = time.perf_counter() + self.slice_s
                    break
                _idle.wait(left)
            self._started = time.perf_counter()
            return
        now = time.perf_counter()
        if now - self._started >= self.slice_s:
            time.sleep(self.pause_s)
            self._started = time.perf_counter()
