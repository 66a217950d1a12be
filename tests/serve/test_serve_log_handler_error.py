"""One exception from an application's handler must not end the embedded log writer thread (it did, for good).

_Onward.emit (ops.py) hands each record to the application's handlers with no guard; LineWriter's thread
(QueueListener._monitor) does not catch either, so the thread ends on the first exception. Every later line is
queued for nobody (lost silently), and once LOG_QUEUE_LINES are queued the app's stop blocks for ever in
LineWriter.enqueue_sentinel (queue full, no reader): the application cannot shut down. A stock handler that fails
calls handleError; an application's own handler (or a filter/formatter of it) can raise.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import httpx
import pytest
from _serve_support import application_logging, proxy_config

from contextfold.serve import ProxyServer
from contextfold.serve.ops import LOG_QUEUE_LINES, LineQueue, LineWriter, log_event
from contextfold.testing import ScriptedLLMServer

WAIT_S = 20.0


class FlakyOnce(logging.Handler):
    """An application's handler that raises on the first proxy line it sees (a full disk, a broken socket)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen: list[str] = []
        self.raised = False

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith("contextfold.serve"):
            return
        if not self.raised:
            self.raised = True
            raise OSError("disk full, once")
        self.seen.append(record.getMessage())


@pytest.fixture
def flaky() -> Iterator[FlakyOnce]:
    handler = FlakyOnce()
    with application_logging(handler):
        yield handler


def test_lines_after_a_handler_error_still_arrive(flaky: FlakyOnce) -> None:
    with ScriptedLLMServer(default="ok") as upstream, ProxyServer(proxy_config(upstream, log_level="info")) as proxy:
        for _ in range(2):
            assert httpx.post(proxy.url + "/v1/chat/completions", timeout=30, json={
                "model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}).status_code == 200
    assert flaky.raised
    assert flaky.seen.count("served") == 2, flaky.seen  # (before the fix: [], the writer died on "serving")


def test_the_app_still_stops_after_a_handler_error(flaky: FlakyOnce) -> None:
    stopped = threading.Event()
    with ScriptedLLMServer(default="ok") as upstream:
        proxy = ProxyServer(proxy_config(upstream, log_level="info")).__enter__()

        def stop() -> None:
            proxy.__exit__(None, None, None)
            stopped.set()

        for n in range(LOG_QUEUE_LINES + 10):  # (a busy day's lines after the error)
            log_event("served", n=n)
        threading.Thread(target=stop, daemon=True).start()
        assert stopped.wait(WAIT_S), "the app's stop never returned (LineWriter.enqueue_sentinel on a full queue)"


class EndsTheThread(logging.Handler):
    """A handler whose first record ends the thread it runs on (what no ``except Exception`` catches)."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = False
        self.written: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not self.ended:
            self.ended = True
            raise SystemExit("the writer thread ends here")
        self.written.append(record.getMessage())


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # (the thread's end, on purpose)
def test_a_stop_does_not_wait_for_a_writer_thread_that_ended() -> None:
    lines, handler = LineQueue(capacity=2), EndsTheThread()
    writer = LineWriter(lines, handler)
    writer.start()
    thread = writer._thread
    assert thread is not None
    log = logging.getLogger("contextfold.serve.test-ended-writer")
    log.propagate, log.level = False, logging.INFO
    log.addHandler(lines)
    try:
        log.info("the line that ends it")
        thread.join(WAIT_S)
        assert not thread.is_alive()
        for n in range(3):  # (the queue full: nothing reads it any more)
            log.info("queued for nobody %d", n)
    finally:
        log.removeHandler(lines)
    stopped = threading.Event()

    def stop() -> None:
        writer.stop()
        stopped.set()

    threading.Thread(target=stop, daemon=True).start()
    assert stopped.wait(WAIT_S), "the stop waited for room a dead writer never makes"  # (before the fix: for ever)
    assert handler.written == ["log lines dropped"]
