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
from _serve_support import proxy_config

from contextfold.serve import ProxyServer
from contextfold.serve.ops import LOG_QUEUE_LINES, log_event
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
    root, serve = logging.getLogger(), logging.getLogger("contextfold.serve")
    saved = root.level, serve.handlers[:], serve.propagate, serve.level
    handler = FlakyOnce()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    serve.handlers[:], serve.propagate = [], True
    serve.setLevel(logging.NOTSET)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(saved[0])
        serve.handlers[:], serve.propagate = saved[1], saved[2]
        serve.setLevel(saved[3])


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
