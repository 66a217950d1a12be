"""The batch processor: the lifecycle between the agent's ``emit()`` and an exporter's ``export(batch)``.

``emit`` only appends to a bounded in-memory queue, so telemetry never makes the agent wait: when the queue is
full the event is dropped and counted. A background thread turns events into dicts, applies the redaction hook,
and hands batches to the exporter; exporter failures are counted and logged, never raised. The processor owns
the lifecycle (``flush``, ``shutdown``); the exporter only exports (see STYLE.md point 4).

The thread is the processor's own, or (``shared_worker=True``) one thread of the process that exports for every
processor sharing it: a manager's archive events file uses that one, so that 1,000 idle managers hold no thread of
their own (issue 22). A thread sleeps until a processor it serves has events due, with no timer while none has.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass
from typing import Any

from ..redact._ledger import CLEARED_MAX_CHARS
from ._pace import GilPacer, after_foreground
from ._session_redaction import CleanPairs, SessionRedaction, all_clean, own_item_redaction, redacted_event, unscanned
from .events import OWN_EVENT_CLASSES, Event, PendingEvent
from .exporter import Exporter, shutdown_exporter

__all__ = [
    "DEFAULT_FLUSH_TIMEOUT_S",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_QUEUE",
    "DEFAULT_SCHEDULE_DELAY_S",
    "BatchProcessor",
    "ProcessorStats",
    "Redactor",
]

_log = logging.getLogger(__name__)
# One line per exported batch (exporter, destination, events, sessions, outcome): the audit trail of everything that
# left the process (004 §Risk 3). INFO on its own logger, so operators route or silence it apart from the warnings.
_audit = logging.getLogger("contextfold.audit")

Redactor = Callable[[dict[str, Any]], dict[str, Any]]

# Upper bound on events waiting for export. A compaction emits ~5 events per turn, so 8,192 holds minutes of a
# busy agent behind a stalled exporter while staying a few MB at most; beyond it we drop rather than grow.
DEFAULT_MAX_QUEUE = 8192
# Events per export call: big enough to amortize a request, small enough that a 1,000-event burst leaves in a
# couple of requests instead of one slow one (the Ariadne exporter further splits by body size).
DEFAULT_MAX_BATCH = 512
# How long a lone event may wait for companions before it is sent. The acceptance target is p95 emit-to-receipt
# under 200 ms, so the wait must stay well below that, leaving room for the request itself.
DEFAULT_SCHEDULE_DELAY_S = 0.05
# Share of max_queue at which the worker starts exporting before its timer: late enough not to compete with a
# burst of emits, early enough to leave half the queue as headroom while the export runs.
_EARLY_WAKE_FRACTION = 0.5
# Default patience of flush()/shutdown(): the end of a session (finish() + close()) must not wait on a frozen
# exporter for more than about a second. A flush that runs out of time marks the exporter as stalled: later flushes
# return at once while that export is still stuck, and shutdown() aborts it instead of waiting again.
DEFAULT_FLUSH_TIMEOUT_S = 1.0
# The patience of the archive's own events file: it is the record, on local storage, so it is worth waiting for
# (a loaded machine can take more than a second to write a few hundred events), and it cannot freeze like a viewer.
DURABLE_FLUSH_TIMEOUT_S = 10.0
# How long a flush or shutdown still waits for an exporter a flush already gave up on: enough for an export that was
# about to finish anyway, small next to DEFAULT_FLUSH_TIMEOUT_S so that finish() + close() stay near one deadline.
STALLED_GRACE_S = 0.02


@dataclass(frozen=True, slots=True)
class ProcessorStats:
    """Counters of a processor's life so far.

    Attributes:
        accepted: events emit() queued.
        dropped: events emit() refused (queue full, or processor shut down).
        exported: events handed to an export() call that returned.
        failed: events in export() calls that raised (and events of ours that could not be built).
        redaction_failures: events dropped because the redaction hook raised (never exported unredacted).
        abandoned: events still queued when shutdown() ran out of time (never exported).
        queued: events waiting right now.
        in_flight: events inside an export() call right now.

    ``accepted == exported + failed + redaction_failures + abandoned + queued + in_flight`` at every moment.
    """

    accepted: int
    dropped: int
    exported: int
    failed: int
    redaction_failures: int
    queued: int
    abandoned: int = 0
    in_flight: int = 0


class BatchProcessor:
    """Batches events to an exporter on a background thread; ``emit`` never blocks and never raises.

    Args:
        exporter: what receives the batches (a list of event dicts each).
        max_queue: events held at most; beyond it emit() drops and counts.
        max_batch: events per export() call at most.
        schedule_delay_s: the longest an event waits for a batch to fill.
        redact: applied to every event dict before export; if it raises, that event is dropped and counted.
        flush_timeout_s: the default patience of flush() and shutdown().
        shared_worker: export on the process's one shared telemetry thread instead of a thread of its own. Only
            for exporters that cannot freeze (a local file, the archive): an export that hangs holds up every
            processor sharing the thread.

    Example::

        processor = BatchProcessor(JsonlExporter("events.jsonl"))
        tracer = Tracer("session-1", processor)
        ...
        processor.shutdown()
    """

    def __init__(
        self,
        exporter: Exporter,
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
        max_batch: int = DEFAULT_MAX_BATCH,
        schedule_delay_s: float = DEFAULT_SCHEDULE_DELAY_S,
        redact: Redactor | None = None,
        flush_timeout_s: float = DEFAULT_FLUSH_TIMEOUT_S,
        shared_worker: bool = False,
    ) -> None:
        if max_queue < 1:
            raise ValueError(f"BatchProcessor: max_queue: must be at least 1, got {max_queue}")
        if max_batch < 1:
            raise ValueError(f"BatchProcessor: max_batch: must be at least 1, got {max_batch}")
        if schedule_delay_s <= 0:
            raise ValueError(f"BatchProcessor: schedule_delay_s: must be positive, got {schedule_delay_s}")
        self.exporter = exporter
        self._max_queue = max_queue
        self._max_batch = max_batch
        self._delay = schedule_delay_s
        self._redaction: SessionRedaction[Redactor] = SessionRedaction(redact)  # (see redact_with)
        self._clean = CleanPairs()  # (the worker's: the strings of events its redactor kept, see _redact_run)
        if flush_timeout_s < 0:
            raise ValueError(f"BatchProcessor: flush_timeout_s: must not be negative, got {flush_timeout_s}")
        self.flush_timeout_s = flush_timeout_s
        # The worker competes with the agent for the GIL; during a burst it waits for its timer unless the queue
        # is half full, so that a burst is not slowed by exports running beside it.
        self._early_wake = max(1, int(max_queue * _EARLY_WAKE_FRACTION))
        self._queue: deque[Event | PendingEvent | Mapping[str, Any]] = deque()
        self._lock = threading.Lock()
        self._finished = threading.Event()  # set once the worker has handled the shutdown (every counter final)
        self._flush_waiters: list[threading.Event] = []
        self._stopping = False
        self._accepted = 0
        self._dropped = 0
        self._exported = 0
        self._failed = 0
        self._redaction_failures = 0
        self._abandoned = 0
        self._in_flight = 0
        self._stalled = False  # a flush ran out of time and none has finished in time since
        # Started here (or the shared one joined), not on the first emit, so that no emit() pays for starting a thread.
        self._worker = _shared_worker() if shared_worker else _Worker(shared=False)
        self._worker.attach()
        atexit.register(self._at_exit)

    # ---- the agent's side: cheap, never blocking on I/O ----

    def redact_with(self, redact: Redactor, session_id: str | None = None) -> None:
        """Redact the events of ``session_id`` with ``redact`` (a manager gives its session's redactor).

        A processor shared by many sessions (a fleet worker's) redacts each session's events with that session's
        redactor, which knows that session's secrets; the events of sessions that gave none go through the hook
        the processor was built with. The most recent sessions are kept (``SESSION_REDACTORS`` of
        :mod:`._session_redaction`).
        """
        with self._lock:
            self._redaction.register(redact, session_id)

    def _redactor_for(self, record: Mapping[str, Any]) -> Redactor | None:
        if not self._redaction.has_sessions():
            return self._redaction.default
        with self._lock:
            return self._redaction.for_session(record.get("session_id"))

    def emit(self, event: Event | PendingEvent | Mapping[str, Any]) -> None:
        """Queue one event (an :class:`~contextfold.telemetry.Event` or an event dict); drop it if the queue is full."""
        with self._lock:
            if self._stopping or len(self._queue) >= self._max_queue:
                self._dropped += 1
                return
            self._queue.append(event)
            self._accepted += 1
            queued = len(self._queue)
        # The worker hears of a queue only when it stops being empty (due after the batch delay) and when it fills up
        # to the early-wake mark (due now): no wake-up per event.
        if queued == 1 or queued == self._early_wake:
            self._worker.schedule(self, now=queued >= self._early_wake)

    def emit_later(self, pending: PendingEvent) -> None:
        """:meth:`emit` of an event built on the worker thread as it is exported (the agent's thread only queues it).

        Through ``self.emit``, so a subclass's own :meth:`emit` (a filter, a sampler) sees these events too.
        """
        self.emit(pending)

    def wake(self) -> None:
        """Export what is queued now instead of after the batch delay; returns at once (a compaction completed)."""
        self._worker.schedule(self, now=True)

    @property
    def dropped(self) -> int:
        """Events dropped so far."""
        with self._lock:
            return self._dropped

    def stats(self) -> ProcessorStats:
        """A snapshot of the counters."""
        with self._lock:
            return ProcessorStats(
                accepted=self._accepted,
                dropped=self._dropped,
                exported=self._exported,
                failed=self._failed,
                redaction_failures=self._redaction_failures,
                queued=len(self._queue),
                abandoned=self._abandoned,
                in_flight=self._in_flight,
            )

    @property
    def stalled(self) -> bool:
        """Whether a flush ran out of time and none has finished in time since (the exporter is behind)."""
        with self._lock:
            return self._stalled

    # ---- lifecycle ----

    def flush(self, timeout: float | None = None) -> bool:
        """Export everything emitted so far; return whether that finished within ``timeout`` seconds.

        ``timeout`` defaults to ``flush_timeout_s``. Once a flush has run out of time, later ones wait
        :data:`STALLED_GRACE_S` at most, until one finishes in time again: an exporter stuck on a frozen server
        (each request running into its own timeout) must not make every flush wait the whole deadline again.
        """
        if threading.current_thread() is self._worker.thread:
            # An exporter that flushes from inside export() would wait for itself (or for its neighbour's export).
            return False
        patience = self.flush_timeout_s if timeout is None else timeout
        if self.stalled:
            patience = min(patience, STALLED_GRACE_S)
        done = self.begin_flush()
        if done is None:
            return self._finished.wait(patience)
        finished = done.wait(patience)
        with self._lock:
            self._stalled = not finished
        return finished

    def begin_flush(self) -> threading.Event | None:
        """Ask the worker to export everything queued now; the returned event is set when it has.

        None when the processor is shutting down (wait for the thread instead). Lets a caller flush several
        processors at once under one deadline.
        """
        done = threading.Event()
        with self._lock:
            if self._stopping:
                return None
            self._flush_waiters.append(done)
        self._worker.schedule(self, now=True)
        return done

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop accepting events, export what is queued within ``timeout``, stop the thread, shut the exporter down.

        ``timeout`` defaults to ``flush_timeout_s``. When time runs out (or a flush already gave up on the
        exporter), the exporter's ``abort()`` (if it has one) ends the export in progress, and what is still
        queued is abandoned and counted. Idempotent. Returns whether everything queued was exported.
        """
        patience = self.flush_timeout_s if timeout is None else timeout
        stalled = self.stalled
        with self._lock:
            already = self._stopping
            self._stopping = True
        atexit.unregister(self._at_exit)
        self._worker.schedule(self, now=True)
        finished = self._finished.wait(min(patience, STALLED_GRACE_S) if stalled else patience)
        if not finished:
            self._give_up()
        if not already and finished:
            try:
                shutdown_exporter(self.exporter)
            except Exception:
                _log.exception("contextfold exporter %r failed to shut down", self.exporter)
        return finished

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the worker to finish with this processor after shutdown(); whether it has (every counter final)."""
        return self._finished.wait(timeout)

    def _give_up(self) -> None:
        """Abandon what is queued and abort the export in progress, so that a frozen exporter cannot hold us."""
        with self._lock:
            abandoned = len(self._queue)
            self._queue.clear()
            self._abandoned += abandoned
            self._stalled = True  # a later shutdown() or flush() waits only the grace period
        abort = getattr(self.exporter, "abort", None)
        if callable(abort):
            try:
                abort()
            except Exception:
                _log.exception("contextfold exporter %r failed to abort", self.exporter)
        if abandoned:
            _log.warning("contextfold telemetry: %d events not exported: the exporter did not finish in time",
                         abandoned)

    def _at_exit(self) -> None:
        self.shutdown()

    # ---- on the worker thread ----

    def _step(self) -> bool:
        """Export what is queued, answer the flushes asked before; True once the processor is finished (shut down)."""
        with self._lock:
            waiters, self._flush_waiters = self._flush_waiters, []
            stopping = self._stopping
        self._drain()
        for waiter in waiters:
            waiter.set()
        if stopping:
            with self._lock:
                late, self._flush_waiters = self._flush_waiters, []
            for waiter in late:
                waiter.set()
            self._finished.set()
        return stopping

    def _drain(self) -> None:
        """Export everything queued at this moment, batch by batch."""
        while True:
            with self._lock:
                # Hold the lock for as few bytecodes as possible: the agent's emit() waits on it.
                if len(self._queue) <= self._max_batch:
                    items = list(self._queue)
                    self._queue.clear()
                else:
                    items = [self._queue.popleft() for _ in range(self._max_batch)]
                self._in_flight = len(items)
            if not items:
                return
            batch = self._prepare(items)
            if batch:
                self._export(batch)
            else:
                with self._lock:
                    self._in_flight = 0

    def _prepare(self, items: list[Event | PendingEvent | Mapping[str, Any]]) -> list[dict[str, Any]]:
        batch: list[dict[str, Any]] = []
        failures = unbuilt = 0
        # Redaction is CPU work under the GIL: in slices, or the agent's thread waits 5 ms; and standing aside while
        # the agent's calls run, unless the queue is filling up (then events would be dropped).
        with self._lock:
            backlog = len(self._queue) + len(items)
        pacer = GilPacer(defer=backlog < self._early_wake)
        built: list[tuple[dict[str, Any], Redactor | None, bool]] = []  # (record, its redaction, built here)
        for item in items:
            pacer.tick()
            if isinstance(item, PendingEvent):
                pending = item
                try:
                    item = pending.build()
                except Exception:
                    unbuilt += 1  # (an event of ours that does not build: a bug, logged, counted as failed)
                    _log.exception("contextfold event %s could not be built; dropped", pending.cls.NAME)
                    continue
            if isinstance(item, Event):
                record = item.to_dict()
                # (Made here only by our own classes: a caller's subclass may hand over a dict it keeps and changes.)
                built.append((record, self._redactor_for(record), type(item) in OWN_EVENT_CLASSES))
            else:
                record = dict(item)
                built.append((record, self._redactor_for(record), False))
        at = 0
        while at < len(built):
            redact = built[at][1]
            end = at + 1
            while end < len(built) and built[end][1] is redact:
                end += 1
            if redact is None:
                batch.extend(record for record, _, _ in built[at:end])
            else:
                failures += self._redact_run(redact, built[at:end], batch, pacer)
            at = end
        if failures or unbuilt:
            with self._lock:
                self._redaction_failures += failures
                self._failed += unbuilt
                self._in_flight -= failures + unbuilt
        return batch

    def _redact_run(self, redact: Redactor, run: list[tuple[dict[str, Any], Redactor | None, bool]],
                    batch: list[dict[str, Any]], pacer: GilPacer) -> int:
        """Redact a run of records that share one redaction into ``batch``, in order; the number dropped."""
        own = own_item_redaction(redact) is not None
        # Each record's own ids and times, checked once (the bulk clearing and redacted_event both leave them out).
        lefts = [unscanned(record) if own and type(record) is dict else None for record, _, _ in run]
        pairs: set[tuple[str, str]] | None = None
        if own:
            pairs = self._clean.at_state(redact)
        done: list[dict[str, Any] | None] = [None] * len(run)
        slow: list[int] = []
        for index, (record, _, ours) in enumerate(run):
            left = lefts[index]
            # An event built here (fresh dicts down to its leaves) whose every string our redactor returned as it was
            # at this state: the redaction would give it back as it is (issue 22: a no-op prepare()'s two events).
            if pairs is not None and ours and left and all_clean(record, pairs, left):
                done[index] = record
            else:
                slow.append(index)
        failures = 0
        if slow:
            # A run of records with one redaction: their short strings cleared in one pass where the hook is a
            # redactor's (issue 22: each event's span ids and times were scanned one by one, ~0.2 ms an event, and
            # a bulk add's 574 write-time cuts' events cost 0.1 s of CPU during the next prepare()).
            with ExitStack() as stack:
                try:
                    stack.enter_context(_clearing(redact, [(run[index][0], lefts[index]) for index in slow]))
                except Exception:  # (a user pattern's time limit in the prefilter: each string is redacted alone)
                    _log.debug("contextfold telemetry: bulk clearing failed; redacting each event alone", exc_info=True)
                for index in slow:
                    pacer.tick()
                    record, left = run[index][0], lefts[index]
                    try:
                        redacted = redacted_event(redact, record, left=left)
                    except Exception:
                        # Exporting the unredacted event could leak a secret; losing it is the lesser harm.
                        failures += 1
                        _log.exception("contextfold redaction hook failed; event %s dropped", record.get("name"))
                        continue
                    if pairs is not None and left and run[index][2]:
                        self._clean.learn(redact, record, redacted, left)
                    done[index] = redacted
            if pairs is not None and self._clean.at_state(redact) is not pairs:
                # A record redacted in this run taught a secret (its key rule, a pattern): the records after it
                # that were passed as clean at the state before are redacted after all, as each alone would be.
                for index in range(slow[0] + 1, len(run)):
                    if done[index] is run[index][0]:
                        pacer.tick()
                        try:
                            done[index] = redacted_event(redact, run[index][0], left=lefts[index])
                        except Exception:
                            failures += 1
                            done[index] = None
                            _log.exception("contextfold redaction hook failed; event %s dropped",
                                           run[index][0].get("name"))
        batch.extend(record for record in done if record is not None)
        return failures

    def _export(self, batch: list[dict[str, Any]]) -> None:
        try:
            self.exporter.export(batch)
        except Exception:
            with self._lock:
                self._failed += len(batch)
                self._in_flight = 0
            _log.exception("contextfold exporter %r failed on a batch of %d events", self.exporter, len(batch))
            self._audit(batch, "failed")
        else:
            with self._lock:
                self._exported += len(batch)
                self._in_flight = 0
            self._audit(batch, "exported")

    def _audit(self, batch: list[dict[str, Any]], outcome: str) -> None:
        if not _audit.isEnabledFor(logging.INFO):
            return
        sessions = sorted({str(e.get("session_id") or "") for e in batch})
        _audit.info("export exporter=%s destination=%s events=%d sessions=%s outcome=%s",
                    type(self.exporter).__name__, _destination(self.exporter), len(batch), ",".join(sessions),
                    outcome)


def _clearing(redact: Redactor, records: list[tuple[dict[str, Any], dict[str, str] | None]],
              ) -> AbstractContextManager[object]:
    """A redactor's bulk clearing of the short strings of ``records``, or nothing (a hook that is no redactor's).

    The hook is a :class:`contextfold.redact.Redactor`'s ``redact_obj`` (a manager's archive events, its exporters).
    Within it the redactor returns each string its prefilter cleared as it is, without a scan (see
    ``Redactor.clearing``); what it does not clear, and a key that names a secret, are redacted as before. Each
    record comes with what redacted_event leaves out of it (its own ids and times), or None when it leaves nothing.
    """
    clearing = getattr(getattr(redact, "__self__", None), "clearing", None)
    if len(records) < _CLEAR_EVENTS_MIN or not callable(clearing) or \
            getattr(redact, "__name__", None) != "redact_obj":
        return nullcontext()
    strings: list[str] = []
    pending: list[Any] = []
    for record, left in records:
        if left:
            pending.extend(value for key, value in record.items() if key not in left)
        else:
            pending.append(record)
    while pending:  # (the records' values, nested dicts and lists too: the ids of a pruned view are one list)
        item = pending.pop()
        kind = type(item)
        if kind is str:
            if len(item) <= CLEARED_MAX_CHARS:
                strings.append(item)
        elif kind is dict:
            pending.extend(item.values())
        elif kind is list or kind is tuple:
            pending.extend(item)
    context: AbstractContextManager[object] = clearing(strings)
    return context


# A run of at least this many events is cleared in bulk (one prefilter pass has a cost of its own); of their strings,
# those of at most CLEARED_MAX_CHARS (what the redactor looks up among the cleared: longer ones are scanned).
_CLEAR_EVENTS_MIN = 8


class _Worker:
    """The thread that exports for processors: one processor's own, or the one every shared processor uses.

    A processor is due ``schedule_delay_s`` after its queue stopped being empty, or at once when asked (a flush, a
    wake, a shutdown, a queue filling up); the thread sleeps until the earliest due one. A processor's own thread
    ends with its processor; the shared one lives as long as the process (a daemon, asleep while nothing is due).
    """

    def __init__(self, *, shared: bool) -> None:
        self._shared = shared
        self._lock = threading.Lock()
        self._due: dict[BatchProcessor, float] = {}  # processor -> when (time.monotonic()) it is to be served
        self._wakeup = threading.Event()
        self.thread: threading.Thread | None = None

    def attach(self) -> None:
        """A processor starts using this worker: start the thread if it is not running."""
        with self._lock:
            if self.thread is None:
                name = "contextfold-telemetry-shared" if self._shared else "contextfold-telemetry"
                self.thread = threading.Thread(target=self._run, name=name, daemon=True)
                self.thread.start()

    def schedule(self, processor: BatchProcessor, *, now: bool) -> None:
        """Serve ``processor`` after its batch delay, or as soon as possible (``now``)."""
        due = 0.0 if now else time.monotonic() + processor._delay
        with self._lock:
            earlier = self._due.get(processor)
            if earlier is not None and earlier <= due:
                return
            self._due[processor] = due
        # The batch delay's wake-up only tells the thread when to wake next: one asked during an agent-facing call
        # is made as the call ends (issue 22, see _pace.after_foreground). One asked for now is never held.
        if now or not after_foreground(self._wakeup.set):
            self._wakeup.set()

    def _run(self) -> None:
        while True:
            self._wakeup.clear()  # (before reading what is due: a schedule() after this point wakes the wait below)
            with self._lock:
                moment = time.monotonic()
                ready = [p for p, due in self._due.items() if due <= moment]
                for processor in ready:
                    del self._due[processor]
                timeout = min(self._due.values()) - moment if self._due else None
            if not ready:
                self._wakeup.wait(timeout)
                continue
            for processor in ready:
                if processor._step() and not self._shared:
                    with self._lock:
                        self.thread = None
                    return


_shared: _Worker | None = None
_shared_lock = threading.Lock()


def _shared_worker() -> _Worker:
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = _Worker(shared=True)
        return _shared


def _destination(exporter: object) -> str:
    """Where an exporter sends events (its URL or file), for the audit line; "-" when it does not say."""
    for name in ("url", "path", "endpoint"):
        value = getattr(exporter, name, None)
        if value:
            return str(value)
    return "-"
