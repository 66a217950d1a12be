"""A card number is a word of its own: Luhn-valid digits inside an id or a hash are no personal data.

An end-to-end run (tests/e2e/test_e2e_redaction.py, CI_REF_READ_AS_CARD_NUMBER) truncated an output whose ref was
``tout_15e3779782774661``: its 13 digits after the hex "e" pass the Luhn check and start like a card network's, so the
telemetry redactor (which drops personal data) exported ``tout_15e[REDACTED:card_number]`` in the ``cache.truncated``
event while the archive's copy (personal data kept) named the ref: the exported event no longer named its output.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache.refs import REF_PATTERN
from contextfold.redact import Redactor

_TELEMETRY = Redactor().for_telemetry()
_CARD_MARKER = "[REDACTED:card_number]"


def _luhn_completed(digits: str) -> str:
    """``digits`` and the check digit that makes them pass the Luhn check."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * 2 if i % 2 == 0 else int(c)
        total += d - 9 if d > 9 else d
    return digits + str(-total % 10)


def test_the_ref_of_the_failing_run_is_kept() -> None:
    ref = "tout_15e3779782774661"
    assert REF_PATTERN.fullmatch(ref)
    assert _TELEMETRY.redact_text("3779782774661") == _CARD_MARKER  # (its digits alone do read as a card number)
    event = {"name": "cache.truncated", "data": {"ref": ref, "bytes": 4273, "kept_bytes": 2332, "tool_name": "bash"}}
    assert _TELEMETRY.redact_obj(event) == event
    assert _TELEMETRY.redact_text(f"[... output cut; ref={ref}]") == f"[... output cut; ref={ref}]"


# Card-like digit runs (13 to 16 digits, Luhn-valid, starting 3-6) after one to three hex characters, the last a letter.
card_like_refs = st.builds(
    lambda head, letter, first, rest: (f"tout_{head}{letter}", _luhn_completed(first + rest)),
    st.text("0123456789abcdef", max_size=2), st.sampled_from("abcdef"), st.sampled_from("3456"),
    st.text("0123456789", min_size=11, max_size=14),
).filter(lambda parts: len(parts[0]) + len(parts[1]) == len("tout_") + 16)


@settings(max_examples=300)
@given(parts=card_like_refs, before=st.sampled_from(["", " ", "ref=", "(", '"']),
       after=st.sampled_from(["", " ", ")", ".", '"', "\n"]))
def test_a_ref_whose_digits_look_like_a_card_number_is_kept(parts: tuple[str, str], before: str, after: str) -> None:
    prefix, digits = parts
    ref = prefix + digits
    assert REF_PATTERN.fullmatch(ref)
    assert _TELEMETRY.redact_text(f"card {digits}") == f"card {_CARD_MARKER}"  # the run alone is a card number
    assert _TELEMETRY.redact_text(before + ref + after) == before + ref + after
    # Nor is a hex or word run that begins with such digits one.
    assert _TELEMETRY.redact_text(f"{digits}{prefix[-1]}0f") == f"{digits}{prefix[-1]}0f"


def test_card_numbers_of_their_own_are_still_redacted() -> None:
    card = "4111111111111111"
    for text in (f"card {card}", "card 4111 1111 1111 1111", "card 4111-1111-1111-1111", f"paid with {card}.",
                 f'{{"card": "{card}"}}', f"card:{card}", f"({card})", card):
        redacted = _TELEMETRY.redact_text(text)
        assert "4111" not in redacted and _CARD_MARKER in redacted, text
    # In JSON text an escaped line break before the number is still a boundary (its "n" is no part of the number).
    arguments = json.dumps({"note": f"customer\n{card}\nthanks"})
    assert "\\n" + card in arguments
    assert card not in _TELEMETRY.redact_text(arguments)
    # The archive's redactor keeps personal data by default, the telemetry one drops it, as before.
    assert Redactor().redact_text(f"card {card}") == f"card {card}"
