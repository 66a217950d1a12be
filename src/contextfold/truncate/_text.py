"""Head/tail truncation of long text (tool outputs) by tokens or bytes, with line caps and a marker.

The start of a tool output usually says what ran and the end says how it finished, so both are kept and the
middle gives way to a marker that states how much was removed (``…N tokens truncated…``). The result never
exceeds the budget, marker and header included, and never splits a character.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..tokens import TiktokenCounter, TokenCounter

__all__ = [
    "DEFAULT_HEAD_RATIO",
    "MAX_LINE_LENGTH",
    "SERIALIZATION_BUFFER",
    "CutGuard",
    "TruncatedText",
    "TruncationUnit",
    "truncate_text",
]

TruncationUnit: TypeAlias = Literal["none", "bytes", "tokens"]
# Where a cut may fall: ``guard(text, at, keep_head)`` returns ``at`` or the edge of a secret ``at`` would split
# (its start when the head is kept, its end when the tail is). Cutting a secret in two leaves a piece that no rule
# recognises; a guard keeps it whole or leaves it out (:meth:`contextfold.redact.Redactor.safe_cut`).
CutGuard: TypeAlias = Callable[[str, int, bool], int]
_UNITS = ("none", "bytes", "tokens")

# Tool outputs are embedded in JSON (escaped quotes, backslashes, \n) and framed by the provider; keeping the text
# 20 % under the budget leaves room for that so the serialized form still fits.
SERIALIZATION_BUFFER = 1.2
# Lines longer than this (minified JS, base64, progress bars) cost thousands of tokens and tell the model nothing
# the first 2,000 characters do not.
MAX_LINE_LENGTH = 2_000
# Half head, half tail: the command and its first results, and how it ended.
DEFAULT_HEAD_RATIO = 0.5
# A first guess of characters per token when searching for a prefix that fits a token budget; only a start point.
_GUESS_CHARS_PER_TOKEN = 4
# Each retry shrinks the space for head and tail by the excess; this bounds the rare retries when BPE merges
# across the marker make the whole count more than the sum of its parts.
_MAX_FIT_ATTEMPTS = 16


@dataclass(frozen=True, slots=True)
class TruncatedText:
    """The outcome of :func:`truncate_text`.

    Attributes:
        text: the text to put in context.
        truncated_units: what the marker states was removed from the middle: tokens for ``unit="tokens"``,
            characters for ``unit="bytes"`` (0 when nothing was).
        total_lines: lines of the original text.
        was_truncated: whether ``text`` differs from the original (middle removed or long lines capped).
        capped_lines: how many lines were cut at ``max_line_length``.
    """

    text: str
    truncated_units: int
    total_lines: int
    was_truncated: bool
    capped_lines: int = 0


def truncate_text(
    text: str,
    budget: int,
    *,
    unit: TruncationUnit = "tokens",
    counter: TokenCounter | None = None,
    head_ratio: float = DEFAULT_HEAD_RATIO,
    max_line_length: int | None = MAX_LINE_LENGTH,
    header: bool = False,
    serialization_buffer: float = SERIALIZATION_BUFFER,
) -> TruncatedText:
    """Fit ``text`` into ``budget`` tokens or UTF-8 bytes, keeping its head and tail.

    Lines longer than ``max_line_length`` characters are capped first (None disables the cap). If the text is
    still over ``budget / serialization_buffer``, its middle is replaced by ``…N tokens truncated…`` (or ``…N chars
    truncated…`` in byte mode), optionally after a ``Total output lines: X`` header. ``unit="none"`` returns the
    text unchanged. ``counter`` counts tokens (default: exact o200k, the gpt-4o/gpt-5 tokenizer).

    Raises:
        ValueError: a parameter out of range, named in the message.
    """
    if not isinstance(text, str):
        raise ValueError(f"text: expected str, got {type(text).__name__}")
    if unit not in _UNITS:
        raise ValueError(f"unit: expected one of {', '.join(_UNITS)}, got {unit!r}")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"budget: expected a non-negative integer, got {budget!r}")
    if not 0.0 <= head_ratio <= 1.0:
        raise ValueError(f"head_ratio: expected a number in [0, 1], got {head_ratio!r}")
    if max_line_length is not None and max_line_length < 1:
        raise ValueError(f"max_line_length: expected a positive integer or None, got {max_line_length!r}")
    if not serialization_buffer >= 1.0:
        raise ValueError(f"serialization_buffer: expected a number >= 1, got {serialization_buffer!r}")

    total_lines = line_count(text)
    if unit == "none":
        return TruncatedText(text, 0, total_lines, False)

    capped, capped_lines = cap_lines(text, max_line_length) if max_line_length else (text, 0)
    measure = _byte_length if unit == "bytes" else (counter or TiktokenCounter()).count
    limit = math.floor(budget / serialization_buffer)
    total = measure(capped)
    if total <= limit:
        return TruncatedText(capped, 0, total_lines, capped_lines > 0, capped_lines)

    head_text = f"Total output lines: {total_lines}\n\n" if header else ""
    word = "tokens" if unit == "tokens" else "chars"
    # The marker's number is at most this, so a marker built with it is at least as long as the final one.
    upper = total if unit == "tokens" else len(capped)
    fixed = measure(head_text + _marker(upper, word))
    if fixed > limit and head_text:
        head_text = ""
        fixed = measure(_marker(upper, word))
    if fixed > limit:
        # Not even the marker fits: the budget is below any useful view of the text.
        removed = total if unit == "tokens" else len(capped)
        return TruncatedText("", removed, total_lines, True, capped_lines)

    room = limit - fixed
    for _ in range(_MAX_FIT_ATTEMPTS):
        head_room = math.floor(room * head_ratio)
        head = _prefix(capped, head_room, measure)
        tail = _suffix(capped[len(head) :], room - head_room, measure)
        removed = total - measure(head) - measure(tail) if unit == "tokens" else len(capped) - len(head) - len(tail)
        out = f"{head_text}{head}{_marker(removed, word)}{tail}"
        excess = measure(out) - limit
        if excess <= 0:
            return TruncatedText(out, removed, total_lines, True, capped_lines)
        room -= excess
        if room < 0:
            break
    out = f"{head_text}{_marker(upper, word)}"
    return TruncatedText(out, upper, total_lines, True, capped_lines)


def line_count(text: str) -> int:
    """Lines of ``text``: newline-terminated lines plus an unterminated last line (0 for empty text)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def cap_lines(text: str, max_line_length: int, guard: CutGuard | None = None) -> tuple[str, int]:
    """``text`` with every line longer than ``max_line_length`` characters cut, and how many lines were cut.

    The cut part is replaced by ``…N chars truncated…``; line endings (LF, CRLF) are kept. ``guard`` moves a cut
    that would split a secret to the secret's start.
    """
    if len(text) <= max_line_length:
        return text, 0
    lines = text.split("\n")
    capped = 0
    for i, line in enumerate(lines):
        body, cr = (line[:-1], "\r") if line.endswith("\r") else (line, "")
        if len(body) > max_line_length:
            at = guard(body, max_line_length, True) if guard is not None else max_line_length
            lines[i] = f"{body[:at]}{_marker(len(body) - at, 'chars')}{cr}"
            capped += 1
    return ("\n".join(lines), capped) if capped else (text, 0)


def _marker(n: int, word: str) -> str:
    return f"…{n} {word} truncated…"


def _byte_length(text: str) -> int:
    # surrogatepass: a lone surrogate (from a lossy decode upstream) is measured, not an error.
    return len(text.encode("utf-8", "surrogatepass"))


def _prefix(text: str, room: int, measure: Callable[[str], int]) -> str:
    """A longest-possible prefix of ``text`` measuring at most ``room`` (whole characters only)."""
    return text[: _fit_length(text, room, measure, from_end=False)]


def _suffix(text: str, room: int, measure: Callable[[str], int]) -> str:
    """A longest-possible suffix of ``text`` measuring at most ``room`` (whole characters only)."""
    k = _fit_length(text, room, measure, from_end=True)
    return text[len(text) - k :]


def _fit_length(text: str, room: int, measure: Callable[[str], int], *, from_end: bool) -> int:
    """The length of a prefix (or suffix) of ``text`` that measures at most ``room``.

    Gallops from a guess and then bisects, measuring only pieces about the size of ``room``, never the whole
    text. Token counts of prefixes are not strictly monotone (BPE merges), so the answer is one that fits and
    cannot grow by bisection, not necessarily the longest.
    """
    n = len(text)
    if room <= 0 or n == 0:
        return 0

    def fits(k: int) -> bool:
        return measure(text[n - k :] if from_end else text[:k]) <= room

    if measure is _byte_length and text.isascii():
        return min(n, room)
    lo, hi = 0, n + 1  # fits(lo) holds; hi is past the end or known not to fit
    guess = min(n, max(1, room * _GUESS_CHARS_PER_TOKEN))
    while True:
        if fits(guess):
            lo = guess
            if guess == n:
                return n
            guess = min(n, guess * 2)
        else:
            hi = guess
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo
