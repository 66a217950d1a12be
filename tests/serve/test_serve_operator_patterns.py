"""The operator's own secret patterns are redacted in the proxy's log lines, a refusal before its session is found
included, as in its sessions' archives and events.

The proxy had no place for them: every log line and session used the built-in patterns only, so a ticket number,
an internal host or a customer id the operator's policy calls secret, quoted in a refused request, reached the log
in clear. ``ServeConfig.redact_patterns`` (``--redact-pattern NAME=REGEX``) now adds them wherever the proxy redacts.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _serve_support import MODEL, proxy_config

from contextfold.cli.serve import config_from_args, register
from contextfold.errors import ConfigError
from contextfold.redact import Redactor
from contextfold.serve import ProxyServer, ServeConfig
from contextfold.serve.ops import JsonFormatter
from contextfold.testing import ScriptedLLMServer
from contextfold.untrusted.regex import PATTERN_TIME_LIMIT_S, TimedPattern

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


def test_a_refusals_log_line_is_scanned_by_the_operators_patterns_off_the_event_loop(
        monkeypatch: pytest.MonkeyPatch, log: io.StringIO) -> None:
    # Reviewer 2 (s17): a refusal's log line (quoting a previous_response_id of up to 1,024 characters) was redacted
    # on the event loop: a pattern that backtracks held every request of the instance up to 1 CPU second a line.
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
            ProxyServer(proxy_config(upstream, redact_patterns={"op": r"zz-loop-(b|bb)+$", **PATTERNS})) as proxy:
        refused = httpx.post(proxy.url + "/v1/responses", timeout=30, headers={"authorization": "Bearer sk-r17-loop"},
                             json={"model": MODEL, "previous_response_id": f"resp_{TICKET}_{'b' * 40}!",
                                   "input": NONCE})
    assert refused.status_code == 400
    assert on_loop and not any(on_loop), f"{on_loop.count(True)} of {len(on_loop)} scans ran on the event loop"
    assert "[REDACTED:ticket]" in log.getvalue() and TICKET not in log.getvalue()  # (redacted all the same)


def test_an_operator_patterns_scan_of_a_short_text_has_a_small_budget() -> None:
    pattern = TimedPattern(r"zz-(b|bb)+$", log_lines=True)
    assert pattern.scan_budget_s(1_100) < PATTERN_TIME_LIMIT_S / 10  # (a log line quoting a 1,024-character id)
    assert pattern.scan_budget_s(10_000_000) == PATTERN_TIME_LIMIT_S  # (a large tool output: the whole limit)


@pytest.mark.parametrize("catch_all", [".", ".+", r"\S+|\s+", "(?s).*",
                                       r"\S+", r"\w+", "[a-z]+"])  # (08dd6b2 took these three: spaces were left)
def test_a_pattern_that_redacts_most_of_plain_text_is_refused_at_start(catch_all: str) -> None:
    with pytest.raises(ConfigError) as refused:
        ServeConfig(redact_patterns={"anything": catch_all, **PATTERNS})
    assert refused.value.field == "redact_patterns.anything" and repr(catch_all) in str(refused.value)


@pytest.mark.parametrize("anchored", [r"^.+", r"^.*$", r"\A.+", r".+$", r"^.+$", r"\A.*\Z"])
def test_an_anchored_catch_all_is_refused_at_start(anchored: str) -> None:
    # (it takes one line of the probe's three, 8c274dd took it; every log line is one line, redacted whole)
    line = f'{{"level": "info", "logger": "contextfold.serve", "msg": "served", "id": "{NONCE}"}}'
    assert Redactor(builtin=False, remember=False, patterns={"x": anchored}).redact_text(line) == "[REDACTED:x]"
    with pytest.raises(ConfigError) as refused:
        ServeConfig(redact_patterns={"anything": anchored, **PATTERNS})
    assert refused.value.field == "redact_patterns.anything" and repr(anchored) in str(refused.value)


@pytest.mark.parametrize("shaped", [
    r"TCK-[0-9]{6}", r"/tmp/\S+", r"\d+", r"sk-[A-Za-z0-9]{20,}", r"[A-Za-z]{4,}", r"[\w.+-]+@[\w-]+\.[\w.]+",
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", r"eyJ[\w-]+\.[\w-]+\.[\w-]+",
    r"\b(?:\d{1,3}\.){3}\d{1,3}\b", r"(?:/[\w.-]+)+", r"password\s*[:=]\s*\S+", r"[A-Z]+-\d+"])
def test_a_pattern_of_a_secrets_shape_is_taken(shaped: str) -> None:
    assert dict(ServeConfig(redact_patterns={"shaped": shaped}).redact_patterns) == {"shaped": shaped}
