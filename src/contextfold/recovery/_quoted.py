"""An error's text without what it quotes of the client: read before its wording is matched.

Providers echo what a client sent in their errors (OpenAI's 400 "Invalid value: '...'. Supported values are: ..."):
a client whose text said "Too many images in request. Max is 1" or "maximum context length is 5 tokens" where the
provider echoes it taught every caller of the model that limit (reviewer 2, s17; the token and byte wordings since
the eighteenth stop). The error's wording is matched in :func:`unquoted` text, and only in a text of at most
:data:`MAX_UNQUOTED_CHARS` (a provider's message is a sentence or two; an echoed value can be megabytes, and the proxy
reads errors on its event loop). Used by :mod:`contextfold.recovery.overflow` and :mod:`contextfold.media.limits`,
both through :func:`said_in`: a wording the error says only inside its quotes (or past the cap) is still said, without
figures, so recovery is never lost (a gateway quoting its upstream's message, ``{exc!r}``, SageMaker's ``with message
"..."``; review of s18). The overflow reader skips a quoted-only wording when the error marks the quote as a value it
refused ("Invalid value: '...'", "'...' is not valid ..."): then it is the client's text echoed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ALL_QUOTES", "MAX_UNQUOTED_CHARS", "STRING_QUOTES", "Said", "said_in", "unquoted"]

# A quoted span (single, double or back quotes; escaped quotes inside kept), opening and closing outside a word (an
# apostrophe is no quote), and the key before it when it is the text's message: a wrapper's rendering of the
# provider's body ("{'error': {'message': 'Too many images ...'}}"), read unquoted.
_MESSAGE_KEY = re.compile(r"""['"]?\b(?:message|msg|detail|error)['"]?\s*[:=]\s*""")
ALL_QUOTES = "'\"`"
# Single and double quotes only: the quotes an echoed string value comes in. Back quotes mark a parameter's name in
# some wordings (Anthropic's "input length and `max_tokens` exceed context limit", TGI's "`inputs` tokens"): taken
# away, the wording would no longer match.
STRING_QUOTES = "'\""
_ESCAPING_QUOTES = "'\""  # (a back-quoted span has no escapes)
_ESCAPED_QUOTE = re.compile(r"""\\(['"])""")
# The longest error text read for a limit (then without its quotes).
MAX_UNQUOTED_CHARS = 8_192
# Messages quoted inside quoted messages read unquoted this deep; deeper spans are dropped like echoed values.
_MAX_QUOTE_DEPTH = 3


@dataclass(frozen=True, slots=True)
class Said:
    """Which wording a text says (its index in the wordings given) and, when it says it outside its quotes, where.

    ``match`` is None when the wording is only inside quotes or the text is past :data:`MAX_UNQUOTED_CHARS`: the
    limit is taken, its figures are not (they may be the client's). ``capped``: the text was past the cap (its
    quotes were not read), rather than the wording found only inside them.
    """

    wording: int
    match: re.Match[str] | None
    capped: bool = False


def said_in(text: str, wordings: Sequence[re.Pattern[str]], quotes: str = ALL_QUOTES) -> Said | None:
    """Whether ``text`` says one of ``wordings``: raw match, cap, unquote, match again; None when it says none.

    Only a text a wording matches raw is unquoted (unquoting only takes words away), and only up to the cap.
    """
    raw = next((index for index, wording in enumerate(wordings) if wording.search(text)), None)
    if raw is None:
        return None
    if len(text) > MAX_UNQUOTED_CHARS:
        return Said(raw, None, capped=True)
    plain = unquoted(text, quotes)
    for index, wording in enumerate(wordings):
        match = wording.search(plain)
        if match:
            return Said(index, match)
    return Said(raw, None)


def unquoted(text: str, quotes: str = ALL_QUOTES, depth: int = 0) -> str:
    """``text`` without the spans it quotes (in ``quotes``), but for a message quoted under a message key (kept).

    One pass: where each span closes is looked up (:func:`_span_ends`), not searched for again from every quote (a
    regex doing so took 48 s on 80 KB of unclosed escaped quotes, reviewer 4).
    """
    ends = _span_ends(text, quotes)
    kept: list[str] = []
    copied = at = 0
    while at < len(text):
        key = _MESSAGE_KEY.match(text, at) if text[at] in quotes or text[at] in "mde" else None
        span_start = key.end() if key is not None else at
        span_end = _span_end(text, span_start, ends)
        if key is not None and span_end < 0:  # (a key's own quotes may open a span: "message" then no span)
            key, span_start = None, at
            span_end = _span_end(text, at, ends)
        if span_end < 0:
            at += 1
            continue
        kept.append(text[copied:at])
        if key is None:
            kept.append(" ")
        else:
            inner = _ESCAPED_QUOTE.sub(r"\1", text[span_start + 1:span_end - 1])
            kept.append(key.group() + (unquoted(inner, quotes, depth + 1) if depth < _MAX_QUOTE_DEPTH else " "))
        copied = at = span_end
    kept.append(text[copied:])
    return "".join(kept)


def _span_end(text: str, start: int, ends: dict[str, list[int]]) -> int:
    """Where the span opening at ``start`` ends (past its closing quote), or -1 when no span opens there."""
    if start >= len(text) or text[start] not in ends or (start > 0 and _is_word(text[start - 1])):
        return -1
    close = ends[text[start]][start + 1]
    if close < 0 or (close + 1 < len(text) and _is_word(text[close + 1])):
        return -1
    return close + 1


def _span_ends(text: str, quotes: str) -> dict[str, list[int]]:
    """For each quote and position, where a span's body read from there meets its closing quote (-1: never).

    Built from the end: a backslash takes the character after it (quotes that escape), so the body from ``i`` closes
    where the body from ``i + 2`` does; any other character defers to ``i + 1``.
    """
    ends: dict[str, list[int]] = {}
    size = len(text)
    for quote in quotes:
        escapes = quote in _ESCAPING_QUOTES
        closes = [-1] * (size + 2)
        for i in range(size - 1, -1, -1):
            char = text[i]
            if char == quote:
                closes[i] = i
            elif escapes and char == "\\":
                closes[i] = closes[i + 2] if i + 1 < size else -1
            else:
                closes[i] = closes[i + 1]
        ends[quote] = closes
    return ends


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"
