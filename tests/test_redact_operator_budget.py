"""An operator's pattern has the whole time limit on messages and outputs, a small budget on log lines only.

Reviewer 4 (s17): the per-character budget meant for the proxy's log lines (10 ms + 2 us a character) applied to
every scan; a legitimate pattern taking 2-4 us a character on a sha256sum listing failed closed and the whole output
was redacted.
"""

from __future__ import annotations

import hashlib
import uuid

from contextfold.redact import Redactor
from contextfold.serve.config import ServeConfig
from contextfold.untrusted.regex import PATTERN_TIME_LIMIT_S, TimedPattern

NONCE = uuid.uuid4().hex[:8]
OPERATOR_PATTERN = r"""(?i)[A-Za-z0-9_]*(?:key|token)\s*[:=]\s*[^\s"']+"""


def _timed_patterns(redactor: Redactor) -> list[TimedPattern]:
    return [p.regex for p in redactor._user_patterns if isinstance(p.regex, TimedPattern)]


def test_a_listing_without_a_secret_is_not_redacted_whole() -> None:
    listing = "\n".join(f"{hashlib.sha256(f'{NONCE}{i}'.encode()).hexdigest()}  file{i}.txt" for i in range(1000))
    out = Redactor(patterns={"envkey": OPERATOR_PATTERN}).redact_text(f"{listing}\nrev4-{NONCE}")
    assert f"rev4-{NONCE}" in out and "[REDACTED" not in out


def test_only_the_proxys_log_lines_scan_within_a_budget_growing_with_the_line() -> None:
    chars = 70_000  # (the listing above)
    config = ServeConfig(redact_patterns={"envkey": OPERATOR_PATTERN})
    for messages in (Redactor(patterns={"envkey": OPERATOR_PATTERN}), config.redactor()):
        (pattern,) = _timed_patterns(messages)
        assert pattern.scan_budget_s(chars) == pattern.scan_budget_s(10) == PATTERN_TIME_LIMIT_S
    (log_pattern,) = _timed_patterns(config.redactor(log_lines=True))
    assert log_pattern.scan_budget_s(1_100) < PATTERN_TIME_LIMIT_S / 10
    assert log_pattern.scan_budget_s(10_000_000) == PATTERN_TIME_LIMIT_S
