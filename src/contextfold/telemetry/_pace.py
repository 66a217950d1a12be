"""Background threads that give the GIL back often, so that the agent's thread never waits long for it.

CPython hands the GIL from a busy thread to a waiting one only after the switch interval (5 ms), so a telemetry
thread redacting and serializing a batch of events holds up every ``prepare()`` that falls into the batch by up to
5 ms per handover (the ~20 ms p99 of issue 15). A thread that works in short slices and sleeps briefly between
them (a real sleep: ``sleep(0)`` gives the GIL back, but takes it again before a waiter wakes) bounds that wait
by the slice.
"""

from __future__ import annotations

import time

__all__ = ["PAUSE_S", "SLICE_S", "GilPacer"]

# Work at most this long before pausing: an agent's prepare() is ~0.2 ms, so 0.5 ms keeps its p99 under 1 ms.
SLICE_S = 0.0005
# Long enough for a thread waiting on the GIL to wake up and take it; short enough to cost the worker little
# (a fifth of its throughput at worst, which the batch processor's queue absorbs).
PAUSE_S = 0.0001


class GilPacer:
    """Call :meth:`tick` between units of work; it sleeps briefly once a slice of work is used up."""

    def __init__(self, slice_s: float = SLICE_S, pause_s: float = PAUSE_S) -> None:
        self.slice_s = slice_s
        self.pause_s = pause_s
        self._started = time.perf_counter()

    def tick(self) -> None:
        """Pause (giving the GIL to any waiting thread) when the current slice is used up."""
        now = time.perf_counter()
        if now - self._started >= self.slice_s:
            time.sleep(self.pause_s)
            self._started = time.perf_counter()
