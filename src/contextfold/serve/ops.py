"""Operations: Prometheus metrics of the instance, and structured log lines with secrets redacted."""

from __future__ import annotations

import contextvars
import copy
import json
import logging
import logging.handlers
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["LOG_QUEUE_LINES", "JsonFormatter", "LineQueue", "LineWriter", "LogRedactorScope", "Metrics",
           "lines_to_the_applications_handlers", "log_event"]

_log = logging.getLogger("contextfold.serve")
# Log lines waiting for the writer thread (LineQueue) at most: a flood of refusals (401s need no token, so anyone can
# send them) faster than lines are redacted drops lines, counted, rather than growing the instance's memory.
LOG_QUEUE_LINES = 10_000
# The redactor of the app whose request (or lifespan) logs a line: apps in one process have their own operator patterns.
_app_redactor: contextvars.ContextVar[Any] = contextvars.ContextVar("contextfold_serve_redactor", default=None)
# Upstream latency buckets (seconds): a cached short reply takes 0.2 s, a long reasoning reply minutes.
_UPSTREAM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
# The proxy's own work per request (load, reconcile, prepare, save): milliseconds unless it compacts.
_PREPARE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Metrics:
    """The instance's counters and histograms, in a registry of its own (two apps in one process stay apart)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("contextfold_serve_requests", "Requests served, by API and HTTP status.",
                                ("api", "status"), registry=r)
        self.tokens_sent = Counter("contextfold_serve_tokens_sent", "Prompt tokens sent upstream (our count).",
                                   ("api",), registry=r)
        self.tokens_saved = Counter("contextfold_serve_tokens_saved",
                                    "Prompt tokens the client's history held beyond what was sent upstream.",
                                    ("api",), registry=r)
        self.usage = Counter("contextfold_serve_usage_tokens", "Tokens the upstream reported, by kind.",
                             ("api", "kind"), registry=r)
        self.compactions = Counter("contextfold_serve_compactions", "Compactions applied to sessions.", ("api",),
                                   registry=r)
        self.maskings = Counter("contextfold_serve_maskings", "Masking passes applied to sessions.", ("api",),
                                registry=r)
        self.recoveries = Counter("contextfold_serve_recoveries",
                                  "Context-overflow errors handled in the proxy, by outcome (retried, failed).",
                                  ("api", "outcome"), registry=r)
        self.retrieval_calls = Counter("contextfold_serve_retrieval_calls",
                                       "Retrieval tool calls the proxy answered itself.", ("tool",), registry=r)
        self.conflicts = Counter("contextfold_serve_session_conflicts",
                                 "Session saves redone because another request saved first.", registry=r)
        self.rebuilds = Counter("contextfold_serve_history_rebuilds",
                                "Requests whose history diverged from the session's (view rebuilt).", registry=r)
        self.upstream_seconds = Histogram("contextfold_serve_upstream_seconds",
                                          "Upstream latency to the response headers, by API.", ("api",),
                                          buckets=_UPSTREAM_BUCKETS, registry=r)
        self.prepare_seconds = Histogram("contextfold_serve_prepare_seconds",
                                         "The proxy's own work before the upstream call (load, feed, prepare, save).",
                                         ("api",), buckets=_PREPARE_BUCKETS, registry=r)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the record's ``fields``; secrets redacted."""

    def __init__(self, redactor: Any = None) -> None:
        super().__init__()
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        line: dict[str, Any] = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) +
                                f".{int(record.msecs):03d}Z", "level": record.levelname.lower(),
                                "logger": record.name, "msg": record.getMessage()}
        line.update(getattr(record, "fields", {}) or {})
        error = getattr(record, "error", None) or _error_text(record)
        if error:
            line["error"] = error
        text = json.dumps(line, ensure_ascii=False, default=str)
        return self.redactor.redact_text(text) if self.redactor is not None else text


def log_event(message: str, *, level: int = logging.INFO, **fields: Any) -> None:
    """A structured log line on ``contextfold.serve`` (never with a request body or an API key)."""
    if _log.isEnabledFor(level):
        _log.log(level, message, extra={"fields": fields})


class LineQueue(logging.handlers.QueueHandler):
    """Hands records to a writer thread (a :class:`LineWriter`) that formats, redacts and writes them.

    The proxy logs on its event loop ("served", "upstream error"): formatting there redacted each line on the loop,
    with the operator's patterns within their budget (10 ms + 2 us a character: a backtracking one held every request
    that long a line). Here a record is only put in a queue of :data:`LOG_QUEUE_LINES`; past it, it is dropped and
    counted, and the next line that goes in says how many (``lines_dropped``; at the writer's stop, a line of its own).
    """

    def __init__(self, capacity: int = LOG_QUEUE_LINES) -> None:
        self.bounded: queue.Queue[logging.LogRecord | None] = queue.Queue(capacity)
        super().__init__(self.bounded)
        self.dropped = 0  # (read and written under the handler's lock: handle() holds it around enqueue)
        self.closed = False

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        """The record with its message merged and its error as text (formatting and redaction are the writer's).

        The exception is not kept: its traceback's frames (a request's locals) would stay alive as long as the
        record waits in the queue, up to :data:`LOG_QUEUE_LINES` of them.
        """
        record.msg, record.args = record.getMessage(), None
        if record.exc_info:
            record = copy.copy(record)  # (the caller's record keeps it for the logger's other handlers)
            record.error = _error_text(record)
            record.exc_info = record.exc_text = None
        # Which redactors the writer applies (_Onward): the logging app's, read here on the logging thread (the
        # context is the request's); a line logged outside any app's context, every serving app's.
        own = _app_redactor.get()
        record.cf_redactors = (own,) if own is not None else _live_redactors
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        """Put the record in the queue, or count it dropped when the queue is full or closed (never waits)."""
        if self.closed:
            self.dropped += 1
            return
        dropped, self.dropped = self.dropped, 0
        if dropped:
            record.fields = {**(getattr(record, "fields", None) or {}), "lines_dropped": dropped}
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += dropped + 1

    def close_intake(self) -> int:
        """Take no more records (each counted dropped) and return the count of those dropped so far (then zero)."""
        self.acquire()
        try:
            self.closed = True
            dropped, self.dropped = self.dropped, 0
        finally:
            self.release()
        return dropped


class LineWriter(logging.handlers.QueueListener):
    """The thread that writes what a :class:`LineQueue` holds through ``handlers`` (formatted, redacted).

    Its stop writes every line queued and then how many were dropped (a flood's last drops had no later line to say
    so). The stock stop put its stop mark without waiting: with the queue full (the flood it is bounded for) it raised
    queue.Full, never joined the thread and lost the lines queued. Here the queue takes no more lines first, so the
    mark waits only for the writer to take one.
    """

    _sentinel = None  # (the stock stop mark, named here: this class puts it)

    def __init__(self, lines: LineQueue, *handlers: logging.Handler) -> None:
        super().__init__(lines.bounded, *handlers)
        self.lines = lines

    def enqueue_sentinel(self) -> None:
        """Put the stop mark, waiting for room (the intake is closed: the writer makes room, nothing takes it).

        A writer thread that ended (it should not: :meth:`handle` catches) makes no room: the stop does not wait.
        """
        while True:
            try:
                self.lines.bounded.put(self._sentinel, timeout=_SENTINEL_WAIT_S)
                return
            except queue.Full:
                if self._thread is None or not self._thread.is_alive():
                    return

    def handle(self, record: logging.LogRecord) -> None:
        """Write one record; an error of a handler's filter ends this line, never the thread (every later line)."""
        try:
            super().handle(record)
        except Exception:  # (a handler's emit reports its own errors: handleError; a filter's comes here)
            _report_handler_error()

    def stop(self) -> None:
        """Close the queue's intake, write the lines queued, then a line with the count dropped (if any)."""
        if self._thread is None:
            return
        dropped = self.lines.close_intake()
        super().stop()
        dropped += self.lines.close_intake()
        if dropped:
            record = logging.LogRecord(_log.name, logging.WARNING, __file__, 0, "log lines dropped", None, None)
            record.fields = {"lines_dropped": dropped}
            self.handle(record)


class _Onward(logging.Handler):
    """The writer thread's handler when the application keeps its own: the record, redacted, handed up the loggers.

    The message and each text of ``fields`` are redacted (the application's formatter decides what it prints of a
    record, ``fields`` included), then the record goes to the handlers it would have reached by propagation (the
    stock last-resort handler when there are none), on this thread.
    """

    def __init__(self, redactor: Any) -> None:
        super().__init__()
        self.redactor = redactor

    def emit(self, record: logging.LogRecord) -> None:
        """Redact the record and hand it up; an error of the application's handlers goes to handleError.

        Unguarded, one exception from an application's handler ended the writer thread: every later line was lost,
        and once the queue was full the app's stop waited for ever.
        """
        try:
            self._redact(record)
            if _log.parent is not None:
                _log.parent.callHandlers(record)
        except Exception:
            self.handleError(record)

    def _redact(self, record: logging.LogRecord) -> None:
        redactors = getattr(record, "cf_redactors", None) or (self.redactor,)

        def redact(text: str) -> str:
            for redactor in redactors:
                text = redactor.redact_text(text)
            return text

        record.msg, record.args = redact(record.getMessage()), None
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            record.fields = {name: redact(value) if isinstance(value, str) else
                             value if value is None or isinstance(value, int | float) else redact(str(value))
                             for name, value in fields.items()}
        error = getattr(record, "error", None)
        if isinstance(error, str):
            record.error = redact(error)


# The writer an application without configure_logging gets while any ServeApp of the process is serving, and how
# many are (apps in one process share the logger; the last to stop puts it back as it was).
_onward_lock = threading.Lock()
_onward: tuple[LineQueue, LineWriter, bool] | None = None
_onward_users = 0
# The redactors of the apps serving (a line logged outside every app's context is redacted with each).
_live_redactors: tuple[Any, ...] = ()
# How long the stop waits for room for its mark before it looks whether the writer thread is still there.
_SENTINEL_WAIT_S = 0.5


class LogRedactorScope:
    """ASGI middleware: the app's requests and lifespan log with its redactor (its operator patterns, F4)."""

    def __init__(self, app: Any, redactor: Any) -> None:
        self.app = app
        self.redactor = redactor

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Pass the call on with this app's redactor as the one its lines are redacted with."""
        token = _app_redactor.set(self.redactor)
        try:
            await self.app(scope, receive, send)
        finally:
            _app_redactor.reset(token)


def _report_handler_error() -> None:
    """What logging does with a handler's error: printed on stderr when ``logging.raiseExceptions``."""
    if logging.raiseExceptions:
        import sys
        import traceback

        traceback.print_exc(file=sys.stderr)


def lines_to_the_applications_handlers(redactor: Any) -> Callable[[], None] | None:
    """While serving without ``configure_logging``: the proxy's lines, redacted, to the application's handlers.

    A thread writes them to the handlers ``contextfold.serve``'s records reach by propagation. Without it, such an
    application got every record on the event loop, unredacted (``fields`` quote the client: a model name), and a
    slow handler held every request meanwhile. Nothing is changed when ``contextfold.serve`` has a handler of its own
    (``configure_logging``'s, or the application's) or does not propagate: where its lines go was chosen. Returns what
    stops it (once every app that started it has: the lines queued are written, the logger put back), or None.
    ``redactor``: the app's (its operator patterns); a line logged in an app's context (:class:`LogRedactorScope`) is
    redacted with its app's, one logged outside every app's with each serving app's.
    """
    global _onward, _onward_users, _live_redactors
    with _onward_lock:
        if _onward is None:
            # (a handler of its own, or propagation turned off: the application chose where the lines go)
            if _log.handlers or not _log.propagate:
                return None
            lines = LineQueue()
            writer = LineWriter(lines, _Onward(redactor))
            writer.start()
            _onward = (lines, writer, _log.propagate)
            _log.addHandler(lines)
            _log.propagate = False  # (the writer hands each record up itself: once, redacted)
        _onward_users += 1
        _live_redactors = (*_live_redactors, redactor)
    stopped = False

    def stop() -> None:
        global _onward, _onward_users, _live_redactors
        nonlocal stopped
        with _onward_lock:
            if stopped or _onward is None:
                return
            stopped = True
            _onward_users -= 1
            mine = _live_redactors.index(redactor)
            _live_redactors = (*_live_redactors[:mine], *_live_redactors[mine + 1:])
            if _onward_users:
                return
            lines, writer, propagate = _onward
            _onward = None
            if lines in _log.handlers:  # (else configure_logging replaced it meanwhile: its choice stands)
                _log.removeHandler(lines)
                _log.propagate = propagate
        writer.stop()

    return stop


def _error_text(record: logging.LogRecord) -> str | None:
    """The record's exception as one line ("Type: message"), or None."""
    if record.exc_info and record.exc_info[1] is not None:
        return f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
    return None
