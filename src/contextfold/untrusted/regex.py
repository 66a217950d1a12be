"""Regular expressions the model chooses, run under a time limit.

A backtracking engine takes exponential time on patterns like ``(a+)+$`` (ReDoS): one such grep pattern, chosen
by the model, would hang the agent. The ``regex`` package (a dependency of tiktoken) accepts the same syntax as
``re`` (``VERSION0``) and a ``timeout`` per call; a search holds one deadline over all the lines it scans, so the
whole tool call is bounded, not each line. The engine also runs some classic ReDoS shapes (``(a+)+$``) in linear
time. Its timeout counts CPU time of the process (``time.process_time``), so the limit here is in CPU seconds: on
a busy machine the wall-clock wait is longer, but the work done is the same.
"""

from __future__ import annotations

import re
import time
from typing import Any

__all__ = ["PATTERN_TIME_LIMIT_S", "InvalidPattern", "PatternTimeout", "TimedPattern", "UntrustedPattern"]

# A grep or history search gives up after this many CPU seconds. A linear pattern scans hundreds of megabytes in
# that time; only a catastrophically backtracking pattern gets near it.
PATTERN_TIME_LIMIT_S = 1.0


class PatternTimeout(ValueError):
    """The pattern ran past its time limit (it backtracks catastrophically); the message says what to change."""


class InvalidPattern(ValueError):
    """``pattern`` does not compile; ``reason`` is the engine's explanation (``missing ), …``)."""

    def __init__(self, pattern: str, reason: str) -> None:
        super().__init__(f"invalid regular expression {pattern!r}: {reason}")
        self.pattern = pattern
        self.reason = reason


class UntrustedPattern:
    """A compiled pattern whose searches share one time limit, started by :meth:`start`.

    Raises:
        InvalidPattern: ``pattern`` is not a valid regular expression.
    """

    def __init__(self, pattern: str, *, ignore_case: bool = False,
                 time_limit_s: float | None = None) -> None:
        import regex  # (here: a manager builds its cache at once, but the model's first grep may never come)

        try:
            # Python's own parser first: its messages are the ones users know, and the syntax is the documented one.
            re.compile(pattern, re.IGNORECASE if ignore_case else 0)
            self._compiled: Any = regex.compile(pattern, regex.VERSION0 | (regex.IGNORECASE if ignore_case else 0))
        except (re.error, regex.error, RecursionError, OverflowError) as exc:
            raise InvalidPattern(pattern, str(exc)) from None
        self.pattern = pattern
        self.time_limit_s = PATTERN_TIME_LIMIT_S if time_limit_s is None else time_limit_s
        self._deadline = time.process_time() + self.time_limit_s

    def start(self) -> None:
        """Begin the time limit now (compiling starts it too)."""
        self._deadline = time.process_time() + self.time_limit_s

    def search(self, text: str) -> bool:
        """Whether ``text`` contains a match.

        Raises:
            PatternTimeout: the search ran past the deadline.
        """
        left = self._deadline - time.process_time()
        if left <= 0:
            raise self._timeout()
        try:
            return self._compiled.search(text, timeout=left) is not None
        except TimeoutError:
            raise self._timeout() from None

    def _timeout(self) -> PatternTimeout:
        return PatternTimeout(
            f"the pattern {self.pattern!r} took more than {self.time_limit_s:g} s and was stopped: it backtracks "
            "too much (nested quantifiers such as (a+)+ or (.*)*); use a simpler pattern or a literal substring")


class TimedPattern:
    """A compiled pattern each of whose scans has the time limit on its own (operator-supplied redaction patterns).

    It reads like a ``re.Pattern`` for :class:`~contextfold.redact.SecretPattern`: ``finditer``, ``match``,
    ``groupindex``, ``pattern``. A scan past the limit raises :class:`PatternTimeout`; what to do then is the
    caller's decision (redaction fails closed: the whole text is redacted).

    Raises:
        InvalidPattern: ``pattern`` is not a valid regular expression.
    """

    def __init__(self, pattern: str, *, time_limit_s: float | None = None) -> None:
        import regex

        try:
            re.compile(pattern)
            self._compiled: Any = regex.compile(pattern, regex.VERSION0)
        except (re.error, regex.error, RecursionError, OverflowError) as exc:
            raise InvalidPattern(pattern, str(exc)) from None
        self.pattern = pattern
        self.groupindex: dict[str, int] = dict(self._compiled.groupindex)
        self.time_limit_s = PATTERN_TIME_LIMIT_S if time_limit_s is None else time_limit_s

    def finditer(self, text: str) -> list[Any]:
        """Every match in ``text``, all found within the time limit."""
        try:
            return list(self._compiled.finditer(text, timeout=self.time_limit_s))
        except TimeoutError:
            raise self._timeout() from None

    def match(self, text: str, pos: int = 0) -> Any:
        """A match at ``pos``, or None."""
        try:
            return self._compiled.match(text, pos, timeout=self.time_limit_s)
        except TimeoutError:
            raise self._timeout() from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimedPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(("TimedPattern", self.pattern))

    def _timeout(self) -> PatternTimeout:
        return PatternTimeout(f"the pattern {self.pattern!r} took more than {self.time_limit_s:g} s and was stopped")
