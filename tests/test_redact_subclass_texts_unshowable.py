"""A number of a subclass whose text cannot be written is kept as the figure it is (review of 674ab2e).

``Redactor._shown_redacted`` compares the texts a subclass shows with its value's own text; it read that one
outside its guard, so an ``int`` subclass past Python's int-to-text digit limit raised ``ValueError`` out of
``redact_obj`` (c04dd8d kept it as a figure): telemetry redaction of an event carrying one failed, the event was
dropped, and the archive of a message holding one failed.
"""

from __future__ import annotations

import enum

from contextfold.redact import Redactor

NONCE = "f1huge4t"
SECRET = f"ghp_{NONCE}a1B2c3D4e5F6g7H8i9J0k1L2m3N4"


class Count(int):
    """A figure of a caller's type."""


class Huge(enum.IntEnum):
    """A figure too long for text whose ``__str__`` shows a secret."""

    BIG = 10**5000

    def __str__(self) -> str:
        return f"big token {SECRET}"


def test_an_int_subclass_past_the_digit_limit_is_kept_as_a_figure() -> None:
    value = Count(10**5000)
    assert Redactor().redact_obj({"n": value, "nested": [value]}) == {"n": value, "nested": [value]}  # 1c2b5ec: raised
    kept = Redactor().redact_obj({"n": value})["n"]
    assert type(kept) is int and kept == value  # (its exact type since lane S, eighteenth stop)


def test_its_own_text_is_still_read_for_a_secret() -> None:
    out = Redactor().redact_obj({"n": Huge.BIG})["n"]
    # (Since lane S, eighteenth stop: its exact figure, which shows no text of its own, rather than its text redacted.)
    assert type(out) is int and out == 10**5000
    assert SECRET not in repr([type(out), out.bit_length()])
