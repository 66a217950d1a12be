"""Regular expressions the model chooses, run under a time limit.

A backtracking engine takes exponential time on patterns like ``(a+)+$`` (ReDoS): one such grep pattern, chosen
by the model, would hang the agent. The ``regex`` package (a dependency of tiktoken) accepts the same syntax as
``re`` (``VERSION0``) and a ``timeout`` per call; a search holds one budget over all the lines it scans, so the
whole tool call is bounded, not each line. The engine also runs some classic ReDoS shapes (``(a+)+$``) in linear
time. The limit is in CPU seconds: on a busy machine the wall-clock wait is longer, but the work done is the same.
It counts the pattern's own work only (the CPU time of this thread inside the engine's calls), not the reading,
decoding and formatting of the lines between them nor other threads' work: with a deadline on the process's CPU
time, a grep of the literal ``zzz_absent`` over 100 cut outputs of 150 KB (15 MB) was stopped at 1 s as one that
"backtracks too much". The clocks are read around a run of lines (:meth:`UntrustedPattern.search_each`), not
each line: reading the thread's CPU clock is a system call, and two a line were about 180 ms of a grep over 100,000
lines. A pattern that is a plain string is looked for with ``in``: the engine's own timeout reads the process's CPU
clock twice a call, six times the search of a short line.

The timeout does not cover compiling, and the engine expands the mandatory copies of counted repeats when it
compiles: ``(?:x{1000}){1000}`` took 0.47 s and 274 MB, four such levels of 60 ran past 3 GB. A pattern whose
repeats would expand to more than :data:`MAX_PATTERN_EXPANSION` items is refused before it is compiled.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

try:  # Python 3.11+: the parser lives under re (importing the old names warns)
    from re import _constants as _sre_constants  # type: ignore[attr-defined]
    from re import _parser as _sre_parser  # type: ignore[attr-defined]
except ImportError:  # Python 3.10
    import sre_constants as _sre_constants
    import sre_parse as _sre_parser

__all__ = [
    "PATTERN_TIME_LIMIT_S", "InvalidPattern", "PatternTimeout", "TimedPattern", "UntrustedPattern", "search_runs",
]

# A grep or history search gives up after this many CPU seconds. A linear pattern scans hundreds of megabytes in
# that time; only a catastrophically backtracking pattern gets near it.
PATTERN_TIME_LIMIT_S = 1.0
# An operator's pattern (:class:`TimedPattern`) scanning the proxy's log lines (``log_lines=True``) does so within
# this floor plus this much a character, at most PATTERN_TIME_LIMIT_S: one that backtracks spent the whole second on a
# log line's 1,000 characters, per line and per pattern (reviewer 2, s17). Messages, outputs and archives keep the
# whole PATTERN_TIME_LIMIT_S: a legitimate pattern takes 2-4 us a character on a sha256sum listing, and past its
# budget the whole text is redacted (reviewer 4, s17).
OPERATOR_SCAN_FLOOR_S = 0.01
OPERATOR_SCAN_S_PER_CHAR = 2e-6
# The most items a pattern's counted repeats may expand to when compiled (each repeat's lower bound times what it
# repeats, nested repeats multiplying): ``x{100000}`` compiles in 0.04 s and 38 MB, any real search needs far less.
MAX_PATTERN_EXPANSION = 100_000
# A search reads its clocks around runs of at most this many lines (or characters, whichever comes first): enough
# that the clock's ~1 µs system calls vanish against the runs' searches, few enough that a grep stopped at its match
# cap searches little past it and a run's lines stay small in memory.
SEARCH_RUN_LINES = 256
SEARCH_RUN_CHARS = 256 * 1024
# A pattern with none of these is a literal string (no escapes, classes, groups, inline flags): it matches where the
# string occurs, found by ``in`` without the engine's call and its timeout (two reads of the process's CPU clock).
_REGEX_SYNTAX = frozenset(".^$*+?{}[]()|\\")

_Line = TypeVar("_Line")


class PatternTimeout(ValueError):
    """The pattern ran past its time limit (it backtracks catastrophically); the message says what to change."""


class InvalidPattern(ValueError):
    """``pattern`` does not compile; ``reason`` is the engine's explanation (``missing ), …``)."""

    def __init__(self, pattern: str, reason: str) -> None:
        super().__init__(f"invalid regular expression {pattern!r}: {reason}")
        self.pattern = pattern
        self.reason = reason


def _refuse_expansion(pattern: str) -> None:
    """Raise ``re.error`` when compiling ``pattern`` would expand its counted repeats past the bound."""
    if _expansion(_sre_parser.parse(pattern)) > MAX_PATTERN_EXPANSION:
        raise re.error(
            f"its counted repeats expand to more than {MAX_PATTERN_EXPANSION:,} items (nested repeats such as "
            "(?:x{1000}){1000} multiply); use smaller repeat counts or an open one such as x+")


def _expansion(items: Any) -> int:
    """How many items the engine builds for a parsed pattern: a repeat's lower bound times its body, summed."""
    total = 0
    for op, value in items:
        if op in _REPEATS:
            low, _high, body = value
            total += max(low, 1) * _expansion(body)
        else:
            total += 1 + sum(_expansion(sub) for sub in _nested(value))
        if total > MAX_PATTERN_EXPANSION:
            return total  # (no need to walk the rest: a product of huge counts stays cheap to stop at)
    return total


def _nested(value: Any) -> list[Any]:
    """The sub-patterns inside an item's value (a group's body, the alternatives of a branch, an assertion's)."""
    if hasattr(value, "data"):  # a parsed sub-pattern
        return [value]
    if isinstance(value, tuple | list):
        return [sub for part in value for sub in _nested(part)]
    return []


_REPEATS = frozenset(
    getattr(_sre_constants, name) for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
    if hasattr(_sre_constants, name)
)


def search_runs(lines: Iterable[_Line], size: Callable[[_Line], int]) -> Iterator[list[_Line]]:
    """``lines`` in consecutive runs, for :meth:`UntrustedPattern.search_each`.

    A run has at most :data:`SEARCH_RUN_LINES` lines and, past its first line, :data:`SEARCH_RUN_CHARS` of ``size``.
    """
    run: list[_Line] = []
    chars = 0
    for line in lines:
        chars += size(line)
        if run and (len(run) >= SEARCH_RUN_LINES or chars > SEARCH_RUN_CHARS):
            yield run
            run = []
            chars = size(line)
        run.append(line)
    if run:
        yield run


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
            _refuse_expansion(pattern)
            self._compiled: Any = regex.compile(pattern, regex.VERSION0 | (regex.IGNORECASE if ignore_case else 0))
        except (re.error, regex.error, RecursionError, OverflowError) as exc:
            raise InvalidPattern(pattern, str(exc)) from None
        self.pattern = pattern
        self.time_limit_s = PATTERN_TIME_LIMIT_S if time_limit_s is None else time_limit_s
        self._spent = 0.0  # CPU seconds spent inside the engine's searches since start()
        # The literal string the pattern is, if it is one (ignoring case: ASCII only, then lowered: a non-ASCII
        # character's case folding is the engine's to decide, and a non-ASCII line goes to the engine too).
        literal = pattern if pattern and _REGEX_SYNTAX.isdisjoint(pattern) else None
        if literal is not None and ignore_case:
            literal = literal.lower() if literal.isascii() else None
        self._literal = literal
        self._ignore_case = ignore_case

    def start(self) -> None:
        """Begin the time limit afresh (compiling starts it too)."""
        self._spent = 0.0

    def search(self, text: str) -> bool:
        """Whether ``text`` contains a match.

        Raises:
            PatternTimeout: the searches since :meth:`start` ran past the time limit.
        """
        return self.search_each((text,))[0]

    def search_each(self, texts: Sequence[str], *, max_hits: int | None = None) -> list[bool]:
        """Whether each of ``texts`` contains a match, in order.

        With ``max_hits``, the answer stops after that many matches: it then covers a prefix of ``texts``, the lines
        after it are not searched.

        The thread's CPU clock is read once before and once after a run of searches with nothing else between them,
        so the limit still counts the pattern's own work only. Inside a run, each search's own timeout is what is
        left of the limit less the wall-clock time of the run so far (a cheap clock that runs at least as fast as
        the thread's CPU time): the run as a whole cannot pass the limit, and a catastrophic line is stopped as
        before. A line stopped by that share of a run, not by the whole limit, is searched again at the start of a
        fresh run, whose first search has all that is left. A literal pattern is looked for with ``in`` (it cannot
        backtrack), in CPU time charged all the same.

        Raises:
            PatternTimeout: the searches since :meth:`start` ran past the time limit.
        """
        found: list[bool] = []
        hits = 0
        wanted = len(texts) if max_hits is None else max_hits
        while len(found) < len(texts) and hits < wanted:
            left = self.time_limit_s - self._spent
            if left <= 0:
                raise self._timeout()
            began = time.thread_time()
            run_began = time.perf_counter()
            run_start = len(found)
            try:
                for at in range(run_start, len(texts)):
                    text = texts[at]
                    if self._literal is not None and (not self._ignore_case or text.isascii()):
                        hit = self._literal in (text.lower() if self._ignore_case else text)
                    else:
                        first = at == run_start
                        share = left if first else left - (time.perf_counter() - run_began)
                        if share <= 0:
                            break
                        try:
                            hit = self._compiled.search(text, timeout=share) is not None
                        except TimeoutError:
                            if first:  # it had all that was left: the pattern is too slow
                                raise self._timeout() from None
                            break
                    found.append(hit)
                    hits += hit
                    if hits >= wanted:
                        break
            finally:
                self._spent += time.thread_time() - began
        return found

    def _timeout(self) -> PatternTimeout:
        return PatternTimeout(
            f"the pattern {self.pattern!r} took more than {self.time_limit_s:g} s and was stopped: it backtracks "
            "too much (nested quantifiers such as (a+)+ or (.*)*); use a simpler pattern or a literal substring")


class TimedPattern:
    """A compiled pattern each of whose scans has a time limit on its own (operator-supplied redaction patterns).

    A scan's limit is ``time_limit_s``; for the proxy's log lines (``log_lines``) it grows with the text
    (:meth:`scan_budget_s`): a short line gets a small one, a megabyte the whole ``time_limit_s``.

    It reads like a ``re.Pattern`` for :class:`~contextfold.redact.SecretPattern`: ``finditer``, ``match``,
    ``groupindex``, ``pattern``. A scan past the limit raises :class:`PatternTimeout`; what to do then is the
    caller's decision (redaction fails closed: the whole text is redacted).

    Raises:
        InvalidPattern: ``pattern`` is not a valid regular expression.
    """

    def __init__(self, pattern: str, *, time_limit_s: float | None = None, log_lines: bool = False) -> None:
        import regex

        try:
            re.compile(pattern)
            _refuse_expansion(pattern)
            self._compiled: Any = regex.compile(pattern, regex.VERSION0)
        except (re.error, regex.error, RecursionError, OverflowError) as exc:
            raise InvalidPattern(pattern, str(exc)) from None
        self.pattern = pattern
        self.groupindex: dict[str, int] = dict(self._compiled.groupindex)
        self.time_limit_s = PATTERN_TIME_LIMIT_S if time_limit_s is None else time_limit_s
        self.log_lines = log_lines

    def scan_budget_s(self, chars: int) -> float:
        """The CPU seconds a scan of a text of ``chars`` characters may take."""
        if not self.log_lines:
            return self.time_limit_s
        return min(self.time_limit_s, OPERATOR_SCAN_FLOOR_S + chars * OPERATOR_SCAN_S_PER_CHAR)

    def finditer(self, text: str) -> list[Any]:
        """Every match in ``text``, all found within the scan's time limit."""
        budget = self.scan_budget_s(len(text))
        try:
            return list(self._compiled.finditer(text, timeout=budget))
        except TimeoutError:
            raise self._timeout(budget) from None

    def match(self, text: str, pos: int = 0) -> Any:
        """A match at ``pos``, or None."""
        budget = self.scan_budget_s(len(text) - pos)
        try:
            return self._compiled.match(text, pos, timeout=budget)
        except TimeoutError:
            raise self._timeout(budget) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimedPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(("TimedPattern", self.pattern))

    def _timeout(self, budget: float) -> PatternTimeout:
        return PatternTimeout(f"the pattern {self.pattern!r} took more than {budget:g} s and was stopped")
