"""Operations: Prometheus metrics of the instance, and structured log lines with secrets redacted."""

from __future__ import annotations

import json
import logging
import logging.handlers
import queue
import threading
import time
from typing import Any

__all__ = ["LOG_QUEUE_LINES", "JsonFormatter", "LineQueue", "Metrics", "log_event"]

_log = logging.getLogger("contextfold.serve")
# Log lines waiting for the writer thread (LineQueue) at most: a flood of refusals (401s need no token, so anyone can
# send them) faster than lines are redacted drops lines, counted, rather than growing the instance's memory.
LOG_QUEUE_LINES = 10_000
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
        if record.exc_info and record.exc_info[1] is not None:
            line["error"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        text = json.dumps(line, ensure_ascii=False, default=str)
        return self.redactor.redact_text(text) if self.redactor is not None else text


def log_event(message: str, *, level: int = logging.INFO, **fields: Any) -> None:
    """A structured log line on ``contextfold.serve`` (never with a request body or an API key)."""
    if _log.isEnabledFor(level):
        _log.log(level, message, extra={"fields": fields})


class LineQueue(logging.handlers.QueueHandler):
    """Hands records to a writer thread (a ``QueueListener``) that formats, redacts and writes them.

    The proxy logs on its event loop ("served", "upstream error"): formatting there redacted each line on the loop,
    with the operator's patterns within their budget (10 ms + 2 us a character: a backtracking one held every request
    that long a line). Here a record is only put in a queue of :data:`LOG_QUEUE_LINES`; past it, it is dropped and
    counted, and the next line that goes in says how many (``lines_dropped``).
    """

    def __init__(self, capacity: int = LOG_QUEUE_LINES) -> None:
        super().__init__(queue.Queue(capacity))
        self.dropped = 0
        self._dropped_lock = threading.Lock()

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        """The record with its message merged (no formatting: that is the writer's, redaction included)."""
        record.msg, record.args = record.getMessage(), None
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        """Put the record in the queue, or count it dropped when the queue is full (never waits)."""
        with self._dropped_lock:
            dropped, self.dropped = self.dropped, 0
        if dropped:
            record.fields = {**(getattr(record, "fields", None) or {}), "lines_dropped": dropped}
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            with self._dropped_lock:
                self.dropped += dropped + 1
