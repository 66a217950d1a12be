"""The proxy's log lines know each session's remembered secrets.

issue 21 §1, the red team's untested note: the proxy's JSON log lines went through a redactor of their own, with the
built-in patterns only. A value the session learned in context (``password: X``) and that a later request echoes
bare into a message the proxy quotes when it refuses the request reached the log in clear.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import httpx
import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

from contextfold.redact import Redactor
from contextfold.serve import ProxyServer, ServeConfig
from contextfold.serve.ops import JsonFormatter
from contextfold.testing import ScriptedLLMServer

SECRET = "Kx9vQ7mZp2Wt"
MODEL = "gpt-4o-mini"


def proxy_config(upstream: ScriptedLLMServer) -> ServeConfig:
    return ServeConfig(port=0, openai_base_url=upstream.base_url, sessions="memory", store="memory",
                       archive="memory", windows={MODEL: 6_000}, log_level="warning")


@pytest.fixture(name="log")
def log_fixture() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(Redactor()))
    logger = logging.getLogger("contextfold.serve")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def chat(url: str, messages: list[dict[str, object]]) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", timeout=10,
                      headers={"authorization": "Bearer sk-ops", "x-contextfold-session": "rt6-log-secrets"},
                      json={"model": MODEL, "messages": messages})


def test_a_refused_request_quoting_a_remembered_secret_logs_it_redacted(log: io.StringIO) -> None:
    with ScriptedLLMServer(context_window=8_000, validator="formats") as upstream, \
            ProxyServer(proxy_config(upstream)) as proxy:
        upstream.push("noted")
        opening = [{"role": "user", "content": f"The staging database: user app, password: {SECRET}. Check it."}]
        assert chat(proxy.url, opening).status_code == 200
        # The client echoes the bare value where the proxy quotes what it refuses (a message's role).
        bad = [*opening, {"role": "assistant", "content": "noted"}, {"role": SECRET, "content": "and now?"}]
        refused = chat(proxy.url, bad)
        assert refused.status_code == 400, (refused.text, upstream.requests[-1].body)
    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    assert any(line["msg"] == "refused" for line in lines), lines
    assert SECRET not in log.getvalue()
