"""The proxy's log lines cost its event loop a queue put: no redaction there, no thread of the pool for a 401.

(3) Lines logged on the event loop ("served", "upstream error") were formatted there, and the formatter redacts the
whole line with the operator's patterns, each within its budget (10 ms + 2 us a character): a pattern that backtracks
held every request that long per line. A thread of their own writes them now (``ops.LineQueue``).
(5) Each refusal's line was redacted in the default thread pool, a 401 too: a flood of requests without the token
(anyone can send them) queued thousands of jobs ahead of the requests' own store calls. A line the proxy wrote whole
(401, 413) is queued as it is.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _serve_support import MODEL, proxy_config

from contextfold.serve import ProxyServer
from contextfold.serve.ops import LOG_QUEUE_LINES, JsonFormatter, LineQueue, LineWriter, log_event
from contextfold.serve.runner import configure_logging
from contextfold.testing import ScriptedLLMServer
from contextfold.untrusted.regex import TimedPattern

NONCE = "r18-log-lines-Wm3k"
TOKEN = "r18-log-lines-token-0123456789"
_LOGGERS = ("contextfold.serve", "uvicorn", "uvicorn.error")


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """The loggers configure_logging sets, put back as they were."""
    saved = [(logging.getLogger(n), logging.getLogger(n).handlers[:], logging.getLogger(n).level,
              logging.getLogger(n).propagate) for n in _LOGGERS]
    try:
        yield
    finally:
        for logger, handlers, level, propagate in saved:
            logger.handlers[:], logger.propagate = handlers, propagate
            logger.setLevel(level)


def test_a_served_line_is_redacted_off_the_event_loop(monkeypatch: pytest.MonkeyPatch, logging_restored: None,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    on_loop: list[bool] = []
    finditer = TimedPattern.finditer

    def watched(self: TimedPattern, text: str) -> list[Any]:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        return finditer(self, text)

    monkeypatch.setattr(TimedPattern, "finditer", watched)
    with ScriptedLLMServer(default=f"ok {NONCE}") as upstream, \
            ProxyServer(proxy_config(upstream, redact_patterns={"op": r"zz-loop-(b|bb)+$"})) as proxy:
        stop = configure_logging("info", proxy.config.redactor(log_lines=True))
        try:
            served = httpx.post(proxy.url + "/v1/chat/completions", timeout=30, json={
                "model": MODEL, "messages": [{"role": "user", "content": f"hello {NONCE}"}]})
        finally:
            if stop is not None:  # (08dd6b2 returned nothing: it wrote on the caller's thread)
                stop()  # (the lines queued are written)
    assert served.status_code == 200
    assert '"msg": "served"' in capsys.readouterr().err
    assert on_loop and not any(on_loop), f"{on_loop.count(True)} of {len(on_loop)} scans ran on the event loop"


def test_a_flood_of_401s_takes_no_thread_of_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("contextfold.serve")
    logger.addHandler(handler)
    jobs: list[str] = []
    to_thread = asyncio.to_thread

    async def counted(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        jobs.append(getattr(func, "__qualname__", repr(func)))
        return await to_thread(func, *args, **kwargs)

    try:
        with ScriptedLLMServer(default=f"ok {NONCE}") as upstream, \
                ProxyServer(proxy_config(upstream, token=TOKEN)) as proxy:
            monkeypatch.setattr(asyncio, "to_thread", counted)
            with httpx.Client(timeout=30) as client:
                statuses = {client.post(proxy.url + "/v1/chat/completions", json={"model": MODEL, "messages": []})
                            .status_code for _ in range(20)}
            flooded = list(jobs)  # (before the proxy stops: closing its stores is a job of its own)
    finally:
        logger.removeHandler(handler)
    assert statuses == {401}
    assert flooded == []  # (08dd6b2: one job a refusal, 20)
    assert stream.getvalue().count('"status": 401') == 20  # (each still logged)


def test_a_full_line_queue_drops_and_counts_instead_of_waiting() -> None:
    queue = LineQueue(capacity=2)
    for n in range(5):
        queue.handle(logging.LogRecord("contextfold.serve", logging.INFO, __file__, 1, f"line {n}", None, None))
    assert queue.queue.qsize() == 2 and queue.dropped == 3
    queue.queue.get_nowait()
    queue.handle(logging.LogRecord("contextfold.serve", logging.INFO, __file__, 1, "after", None, None))
    last = [queue.queue.get_nowait() for _ in range(2)][-1]
    assert last.getMessage() == "after" and last.fields == {"lines_dropped": 3} and queue.dropped == 0


class _GatedRedactor:
    """Holds the writer on its first line until ``gate`` is set (at most 10 s: a stuck test fails, never hangs)."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    def redact_text(self, text: str) -> str:
        self.gate.wait(10)
        return text


def _open_gate_at_close(monkeypatch: pytest.MonkeyPatch, gate: threading.Event) -> None:
    """The writer goes on once stop() has closed the queue's intake: stop() begins with the queue full."""
    close_intake = LineQueue.close_intake

    def closing(self: LineQueue) -> int:
        dropped = close_intake(self)
        gate.set()
        return dropped

    monkeypatch.setattr(LineQueue, "close_intake", closing)


def test_a_writer_stopped_with_its_queue_full_writes_every_line_then_the_drops(
        monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = _GatedRedactor()
    _open_gate_at_close(monkeypatch, redactor.gate)
    out = io.StringIO()
    stream = logging.StreamHandler(out)
    stream.setFormatter(JsonFormatter(redactor))
    lines = LineQueue(capacity=8)
    writer = LineWriter(lines, stream)
    writer.start()
    try:
        for n in range(20):  # (the writer holds at most one: the queue is full, the rest dropped)
            lines.handle(logging.LogRecord("contextfold.serve", logging.INFO, __file__, 1, f"{NONCE} {n}", None, None))
        assert lines.bounded.full()
        writer.stop()  # (8c274dd: queue.Full, the thread never joined)
    finally:
        redactor.gate.set()
    written = [json.loads(line) for line in out.getvalue().splitlines()]
    said = [line for line in written if line["msg"].startswith(NONCE)]
    reported = sum(line.get("lines_dropped", 0) for line in written)
    assert len(said) in (8, 9) and len(said) + reported == 20  # (8c274dd: the last drops never reported)
    assert written[-1]["msg"] == "log lines dropped"


def test_configure_logging_again_with_the_queue_full_does_not_fail(monkeypatch: pytest.MonkeyPatch,
                                                                  logging_restored: None) -> None:
    redactor = _GatedRedactor()
    _open_gate_at_close(monkeypatch, redactor.gate)
    stop = configure_logging("info", redactor)
    try:
        for n in range(LOG_QUEUE_LINES + 50):
            log_event("refused", level=logging.WARNING, nonce=NONCE, n=n)
        configure_logging("info")()  # (stops the first writer: 8c274dd raised queue.Full here)
    finally:
        redactor.gate.set()
        stop()


def test_a_queued_record_keeps_its_error_as_text_not_its_traceback() -> None:
    lines = LineQueue(capacity=2)
    try:
        raise ValueError(f"upstream down {NONCE}")
    except ValueError:
        record = logging.LogRecord("contextfold.serve", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    lines.handle(record)
    queued = lines.bounded.get_nowait()
    assert queued is not None and queued.exc_info is None  # (its frames no longer held while it waits)
    assert record.exc_info is not None  # (the logger's other handlers still get it)
    assert json.loads(JsonFormatter().format(queued))["error"] == f"ValueError: upstream down {NONCE}"


def test_a_uvicorn_error_line_is_written_once(logging_restored: None, capsys: pytest.CaptureFixture[str]) -> None:
    """``uvicorn.error`` passes its records up to ``uvicorn``, which had the same handler: each line came out twice."""
    stop = configure_logging("info")
    logging.getLogger("uvicorn.error").warning("%s uvicorn said", NONCE)
    stop()
    lines = [line for line in capsys.readouterr().err.splitlines() if NONCE in line]
    assert len(lines) == 1, lines
    assert f"{NONCE} uvicorn said" in json.loads(lines[0])["msg"]
