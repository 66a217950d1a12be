"""Reading a media refusal without its quotes costs work linear in a bounded text (reviewer 4, s17).

The quote remover was a regex retrying from every quote: an echoed value of unclosed escaped quotes ('"\\' * n) cost
n^2 (80 KB: 48 s) on the proxy's event loop. Operation counts here, no clocks.
"""

from __future__ import annotations

import random
import re
import uuid
from typing import Any

import pytest

from contextfold.media import limits, parse_media_limit
from contextfold.recovery import _quoted, parse_limit_error
from contextfold.serve.upstream import UpstreamError

NONCE = uuid.uuid4().hex[:8]
_ADVERSARIAL = '"\\' * 100_000  # 200 KB of quotes, each escaping the next one's opening


def _reference_unquoted(text: str) -> str:
    """The regex the scanner replaced (quadratic on unclosed escaped quotes; fine on short texts)."""
    quoted = re.compile(r"""(?P<key>['"]?\b(?:message|msg|detail|error)['"]?\s*[:=]\s*)?"""
                        r"""(?<!\w)(?P<span>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`)(?!\w)""", re.DOTALL)

    def outside(match: re.Match[str]) -> str:
        if match["key"] is None:
            return " "
        return match["key"] + _reference_unquoted(re.sub(r"""\\(['"])""", r"\1", match["span"][1:-1]))

    return quoted.sub(outside, text)


def test_scanner_reads_as_the_regex_did_on_short_texts() -> None:
    pieces = ["'", '"', "`", "\\", " ", "a", "_", ":", "=", "message", "msg", "error", "detail", "\n", "5", "é", NONCE]
    rng = random.Random(22)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert limits._unquoted(text) == _reference_unquoted(text), text


def test_scanner_steps_are_linear_on_unclosed_escaped_quotes(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = 0
    span_end = _quoted._span_end

    def counted(text: str, start: int, ends: dict[str, list[int]]) -> int:
        nonlocal steps
        steps += 1
        return span_end(text, start, ends)

    monkeypatch.setattr(_quoted, "_span_end", counted)
    text = f"Invalid value: '{NONCE} {_ADVERSARIAL}'. Supported values are: 'low' and 'high' {NONCE}"
    said = limits._unquoted(text)
    assert said.startswith("Invalid value: ")  # (the unclosed echo stays, the closed 'low' and 'high' go)
    assert said.endswith(f"Supported values are:   and   {NONCE}")
    assert steps <= 2 * len(text)


def test_an_echo_without_item_wording_is_never_unquoted(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_quoted, "unquoted", lambda text, *rest: calls.append(len(text)) or text)
    echoed = f"{NONCE} " + '"\\' * 500_000
    body = {"error": {"message": f"Invalid value: '{echoed}'. Supported values are: 'low', 'high', and 'auto'.",
                      "type": "invalid_request_error"}}
    assert parse_limit_error(UpstreamError(400, body, "openai"), provider="openai") is None
    assert parse_media_limit(body) is None
    assert calls == []


def test_a_text_past_the_cap_is_never_unquoted(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    unquoted = _quoted.unquoted

    def counted(text: str, *rest: Any) -> str:
        calls.append(len(text))
        return unquoted(text, *rest)

    monkeypatch.setattr(_quoted, "unquoted", counted)
    echoed = f"Too many images in request. Max is 1 {NONCE} " + "x" * limits._MAX_UNQUOTED_CHARS
    body = {"error": {"message": f"Invalid value: '{echoed}'. Supported values are: 'low', 'high', and 'auto'.",
                      "type": "invalid_request_error"}}
    assert parse_media_limit(body) is None  # (the wording is the client's echoed value: no limit read)
    assert calls == []
    quoted = {"error": {"message": f"{{'error': {{'message': 'Too many images in request. Max is 3'}}}} {NONCE}"}}
    info = parse_media_limit(quoted)
    assert info is not None and info.limit == 3
    assert calls and max(calls) <= limits._MAX_UNQUOTED_CHARS
