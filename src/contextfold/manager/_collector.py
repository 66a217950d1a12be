"""The cyclic garbage collector, paused while a long history is compacted.

A compaction reads the whole view and keeps what it builds until it returns: the plan's units and pairs, the
readings, the summary's input, the redactor's records, the transcript's pieces. Collections during it free none of
that, and each full one walks the whole heap, whose bulk is the history itself (issue 22: the first compaction of
100,000 recorded messages set off ~770 collections, 3 of them full, 0.45-0.6 s of a 2.7 s ``prepare()``, measured
with ``gc.callbacks``). Reference counting still frees whatever is not in a cycle meanwhile. The collector resumes
when the last pausing compaction of the process ends, if it was running when the first began. What the pause made
and kept goes straight to the oldest generation (see ``_promote_young``): the cycles made meanwhile are found by the
next full collection (which costs what it costs without the pause, ~0.12 s after the first compaction of 100,000
recorded messages).

A compaction waiting on the network (an LLM summarizer's call, seconds to a minute) lifts its pause for the wait
(:func:`collector_released`): the pause is process-wide, and the application's other threads (a server's requests,
other sessions) would make garbage all that time with nothing collecting its cycles.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PAUSE_MIN_MESSAGES", "collector_paused", "collector_released"]

# Views under this many messages compact in milliseconds, setting off few collections: the collector runs as usual,
# so a process serving many small sessions never runs with it off.
PAUSE_MIN_MESSAGES = 10_000

_lock = threading.Lock()
_pausing = 0  # compactions of the process pausing the collector now
_resume = False  # whether the collector was running when the first of them began
# The thresholds the first pause found (what the last one puts back). A pause sets the first to 0, which stops
# automatic collection (documented so on every CPython) and leaves ``gc.isenabled()`` to the application: a
# ``gc.disable()`` it makes during the pause is its own and stays (``gc.disable()`` by the pause hid it, and the
# collector was turned on again at the pause's end, red team 19).
_thresholds: tuple[int, ...] = ()
_held = threading.local()  # (``depth``: the pauses this thread holds)
# Whether the collector has generations (None: not looked yet). A free-threaded build's has none, and its freeze
# walks the heap: nothing is promoted there. (Looked up at the first pause's end: sysconfig is not imported for it.)
_generational: bool | None = None


def _pause() -> None:
    global _pausing, _resume, _thresholds
    with _lock:
        if _pausing == 0:
            _thresholds = gc.get_threshold()
            _resume = gc.isenabled() and _thresholds[0] != 0
            if _resume:
                gc.set_threshold(0, *_thresholds[1:])
        _pausing += 1


def _unpause() -> None:
    global _pausing, _resume
    with _lock:
        _pausing -= 1
        if _pausing == 0 and _resume:
            _resume = False
            if gc.get_threshold()[0] == 0:  # (else the application set thresholds of its own meanwhile: kept)
                gc.set_threshold(*_thresholds)
            _promote_young()


def _promote_young() -> None:
    """Move every object the young generations hold into the oldest one, without walking them.

    What a paused block made and kept (a bulk add's 100,000 messages: ~300,000 tracked objects, each message with
    its meta) would otherwise be walked by the first young collection after the pause (~0.1 s, issue 22), then by
    the middle generation's, before reaching the oldest generation, where it goes anyway. ``gc.freeze()`` moves the
    generations into the permanent one and ``gc.unfreeze()`` moves that into the oldest, each a list splice. Cycles
    made during the pause are found by the next full collection instead (or any ``gc.collect()``). Not done when
    the application froze objects itself: ``unfreeze()`` would thaw them too.
    """
    global _generational
    if _generational is None:
        import sysconfig

        _generational = not sysconfig.get_config_var("Py_GIL_DISABLED")
    if _generational and gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


@contextmanager
def collector_paused(messages: int) -> Iterator[None]:
    """Pause automatic collection for the block when the view holds ``messages`` >= :data:`PAUSE_MIN_MESSAGES`.

    Compactions on several threads share one pause: the last to end resumes the collector (if it was running when
    the first began). ``gc.collect()`` called meanwhile still collects.
    """
    if messages < PAUSE_MIN_MESSAGES:
        yield
        return
    _pause()
    _held.depth = getattr(_held, "depth", 0) + 1
    try:
        yield
    finally:
        _held.depth -= 1
        _unpause()


@contextmanager
def collector_released() -> Iterator[None]:
    """Inside this thread's pause: the collector runs again for the block (unless another thread's pause holds it).

    For a wait on the network; outside a pause it does nothing.
    """
    depth = getattr(_held, "depth", 0)
    if not depth:
        yield
        return
    _held.depth = 0
    for _ in range(depth):
        _unpause()
    try:
        yield
    finally:
        for _ in range(depth):
            _pause()
        _held.depth = depth
