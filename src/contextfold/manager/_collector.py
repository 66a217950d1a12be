"""The cyclic garbage collector, paused while a long history is compacted.

A compaction reads the whole view and keeps what it builds until it returns: the plan's units and pairs, the
readings, the summary's input, the redactor's records, the transcript's pieces. Collections during it free none of
that, and each full one walks the whole heap, whose bulk is the history itself (issue 22: the first compaction of
100,000 recorded messages set off ~770 collections, 3 of them full, 0.45-0.6 s of a 2.7 s ``prepare()``, measured
with ``gc.callbacks``). Reference counting still frees whatever is not in a cycle meanwhile. The collector resumes
when the last pausing compaction of the process ends, if it was running when the first began, and then finds the
cycles made meanwhile (a full collection right after costs what it costs without the pause, ~0.12 s there).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PAUSE_MIN_MESSAGES", "collector_paused"]

# Views under this many messages compact in milliseconds, setting off few collections: the collector runs as usual,
# so a process serving many small sessions never runs with it off.
PAUSE_MIN_MESSAGES = 10_000

_lock = threading.Lock()
_pausing = 0  # compactions of the process pausing the collector now
_resume = False  # whether the collector was running when the first of them began


@contextmanager
def collector_paused(messages: int) -> Iterator[None]:
    """Pause automatic collection for the block when the view holds ``messages`` >= :data:`PAUSE_MIN_MESSAGES`.

    Compactions on several threads share one pause: the last to end resumes the collector (if it was running when
    the first began). ``gc.collect()`` called meanwhile still collects.
    """
    global _pausing, _resume
    if messages < PAUSE_MIN_MESSAGES:
        yield
        return
    with _lock:
        if _pausing == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pausing += 1
    try:
        yield
    finally:
        with _lock:
            _pausing -= 1
            if _pausing == 0 and _resume:
                _resume = False
                gc.enable()
