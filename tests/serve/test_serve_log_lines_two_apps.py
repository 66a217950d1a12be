"""Two proxies in one process without configure_logging: the second's operator patterns redact nothing.

lines_to_the_applications_handlers (ops.py) starts one writer with the first app's redactor; a later app only
counts itself in, so its own redact_patterns never apply: its "served" line carries its secret in clear to the
application's handlers, which are to get the lines redacted with the operator's patterns.
"""
from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from _serve_support import ProxyLines, application_logging, proxy_config

from contextfold.serve import ProxyServer
from contextfold.testing import ScriptedLLMServer


@pytest.fixture
def collected() -> Iterator[ProxyLines]:
    handler = ProxyLines()
    with application_logging(handler):
        yield handler


def test_each_apps_patterns_redact_its_lines(collected: ProxyLines) -> None:
    with ScriptedLLMServer(default="ok") as upstream, \
            ProxyServer(proxy_config(upstream, default_window=6_000, redact_patterns={"ticket": r"TCK-[0-9]{6}"})), \
            ProxyServer(proxy_config(upstream, default_window=6_000,
                                     redact_patterns={"project": r"PRJ-[0-9]{6}"})) as second:
        assert httpx.post(second.url + "/v1/chat/completions", timeout=30, json={
            "model": "acme-PRJ-123456-large", "messages": [{"role": "user", "content": "hello"}]}).status_code == 200
    models = [fields["model"] for _, fields, *_ in collected.seen if "model" in fields]
    assert models and "PRJ-123456" not in repr(models), models  # (before the fix: the second app's secret in clear)
