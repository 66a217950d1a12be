"""Personal data: e-mail addresses, phone numbers and payment card numbers.

Not secrets: an agent's working data (the customer whose booking it changes), so the archive keeps them exact by
default for restore. What leaves the process as telemetry drops them (``Redactor.for_telemetry``); the
``personal_data`` setting moves that line (see :class:`~contextfold.redact.Redactor`). They are never remembered as
secrets.
"""

from __future__ import annotations

import re

from ._pattern import SecretPattern, pattern

__all__ = ["PERSONAL_KINDS", "PERSONAL_PATTERNS"]

_EMAIL = r"(?<![\w.+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,24}(?![\w\-])"
# International (+CC and groups) or North American ((415) 555-0100, 415-555-0100, 415.555.0100) numbers: digits
# with separators, never a bare run (token counts, ids and timestamps are bare runs or dates).
_PHONE = (
    r"(?<![\w+])(?:\+\d{1,3}[ .\-]?(?:\(\d{1,4}\)[ .\-]?)?\d{1,4}(?:[ .\-]\d{2,4}){1,4}"
    r"|\(\d{3}\)[ .\-]?\d{3}[ .\-]\d{4}|\d{3}[.\-]\d{3}[.\-]\d{4})(?![\w])"
)
# 13 to 19 digits, in groups or not, that pass the Luhn check and start like a card network's numbers: a word of
# their own. Digits inside a word are an id or a hash, not a card: a ref id ``tout_15e3779782774661`` (hex, whose
# digits ran Luhn-valid after its "e") had its tail redacted in telemetry, and the exported event no longer named the
# output the archive's copy names. An escaped line break before the number (JSON text) is still a boundary. The
# first digit comes before the boundary checks (which look back past it) so that the engine searches for that digit
# instead of trying the checks at every position (~5x faster on digit-heavy text).
_CARD = r"[3-6](?:(?<![\w\-][3-6])|(?<=\\[nrt][3-6]))\d{3}(?:[ \-]?\d){9,15}(?![\w\-])"


def _luhn(m: re.Match[str]) -> bool:
    digits = [int(c) for c in m.group() if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _phone_digits(m: re.Match[str]) -> bool:
    return 7 <= sum(c.isdigit() for c in m.group()) <= 15


PERSONAL_PATTERNS: tuple[SecretPattern, ...] = (
    pattern("email", _EMAIL, "@"),
    pattern("card_number", _CARD, accept=_luhn, needs=r"[3-6]\d{3}"),
    pattern("phone", _PHONE, accept=_phone_digits, needs=r"\d[ .\-)]\d"),
)
PERSONAL_KINDS = frozenset(p.name for p in PERSONAL_PATTERNS)
