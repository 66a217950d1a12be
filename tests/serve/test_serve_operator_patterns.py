"""The operator's own secret patterns are redacted in the proxy's log lines, a refusal before its session is found
included, as in its sessions' archives and events.

The proxy had no place for them: every log line and session used the built-in patterns only, so a ticket number,
an internal host or a customer id the operator's policy calls secret, quoted in a refused request, reached the log
in clear. ``ServeConfig.redact_patterns`` (``--redact-pattern NAME=REGEX``) now adds them wherever the proxy redacts.
"""

from __future__ import annotations

import argparse
import io
import logging
from collections.abc import Iterator

import httpx
import pytest
from _serve_support import MODEL, proxy_config

from contextfold.cli.serve import config_from_args, register
from contextfold.errors import ConfigError
from contextfold.serve import ProxyServer, ServeConfig
from contextfold.serve.ops import JsonFormatter
from contextfold.testing import ScriptedLLMServer

NONCE = "r17-patterns-Hn6x"
TICKET = "TCK-482913"
PATTERNS = {"ticket": r"TCK-[0-9]{6}"}


@pytest.fixture
def log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())  # (no redaction of its own: what the proxy logged is what is seen)
    logger = logging.getLogger("contextfold.serve")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def test_refusals_before_and_after_the_session_is_found_log_the_operators_patterns_redacted(
        log: io.StringIO) -> None:
    with ScriptedLLMServer(validator="formats", default=f"ok {NONCE}") as upstream, \
            ProxyServer(proxy_config(upstream, redact_patterns=PATTERNS)) as proxy:
        unknown = httpx.post(proxy.url + "/v1/responses", headers={"authorization": "Bearer sk-r17-patterns"},
                             json={"model": MODEL, "previous_response_id": f"resp_{TICKET}", "input": NONCE},
                             timeout=30)
        assert unknown.status_code == 400  # (no session: the proxy never gave that response)
        messages = [{"role": "user", "content": f"look at {NONCE}"}, {"role": "assistant", "content": "ok"},
                    {"role": TICKET, "content": "and now?"}]
        quoted = httpx.post(proxy.url + "/v1/chat/completions", json={"model": MODEL, "messages": messages},
                            headers={"authorization": "Bearer sk-r17-patterns", "x-contextfold-session": NONCE},
                            timeout=30)
        assert quoted.status_code == 400
    assert log.getvalue().count("[REDACTED:ticket]") >= 2 and TICKET not in log.getvalue()  # (c04dd8d: no such field)


def test_the_command_line_takes_patterns_and_refuses_a_bad_one() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--redact-pattern", "ticket=TCK-[0-9]{6}"])
    config = config_from_args(args, environ={})
    assert isinstance(config, ServeConfig) and dict(config.redact_patterns) == PATTERNS
    with pytest.raises(ConfigError) as bad:
        ServeConfig(redact_patterns={"broken": "TCK-[0-9"})
    assert bad.value.field == "redact_patterns.broken"
