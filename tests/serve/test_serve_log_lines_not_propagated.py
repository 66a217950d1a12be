"""An application that cut contextfold.serve off from its handlers (propagate = False) gets its lines anyway.

lines_to_the_applications_handlers (ops.py) starts its writer whenever contextfold.serve has no handler, and
_Onward.emit hands every record to ``_log.parent.callHandlers`` whatever ``propagate`` was: the application's
choice (no proxy lines on its handlers) is overridden while the app serves.
"""
from __future__ import annotations

import logging

import httpx
from _serve_support import application_logging, proxy_config

from contextfold.serve import ProxyServer
from contextfold.testing import ScriptedLLMServer


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("contextfold.serve"):
            self.messages.append(record.getMessage())


def test_a_logger_cut_off_by_the_application_stays_cut_off() -> None:
    collected = Collected()
    with application_logging(collected, propagate=False), \
            ScriptedLLMServer(default="ok") as upstream, \
            ProxyServer(proxy_config(upstream, default_window=6_000)) as proxy:  # (no proxy lines on my handlers)
        assert httpx.post(proxy.url + "/v1/chat/completions", timeout=30, json={
            "model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}).status_code == 200
    assert collected.messages == [], collected.messages  # (before the fix: both lines)
