"""A number or string of a subclass shows a text of its own: redaction reads it (sixteenth stop's "left out").

An ``IntEnum`` member whose ``__str__`` or ``__format__`` says what it stands for passed telemetry redaction in
clear (c04dd8d kept every ``int`` as a figure): a sink that prints or formats an event wrote the secret. The
immutable standard types a message's meta holds as their text (``Fraction``, ``PurePath``, IP addresses, enum
members) are redacted as that text, under a secret-named key as a string would be.
"""

from __future__ import annotations

import enum
import ipaddress
import json
from fractions import Fraction
from pathlib import PurePosixPath
from typing import Any

import pytest

from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.telemetry import TokenEstimate
from contextfold.telemetry._session_redaction import redacted_event

NONCE = "rt20shw5k"
SECRET = f"ghp_{NONCE}a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5"


class Level(enum.IntEnum):
    LOW = 1

    def __str__(self) -> str:
        return f"low token {SECRET}"


class Formatted(enum.IntEnum):
    LOW = 1

    def __format__(self, spec: str) -> str:
        return f"low token {SECRET}"


class Tag(str):
    def __str__(self) -> str:
        return f"tag token {SECRET}"


class Plain(enum.IntEnum):
    LOW = 1


def _shown(value: Any) -> str:
    return f"{value} {value!s} {value!r} {json.dumps(value, default=str)}"


@pytest.mark.parametrize("value", [Level.LOW, Formatted.LOW, Tag("plain")], ids=["str", "format", "str-subclass"])
def test_a_subclass_showing_a_secret_is_redacted_in_telemetry(value: Any) -> None:
    record = {**TokenEstimate(system=0, developer=0, tools_schema=0, messages=1, session_id=f"s-{NONCE}").to_dict(),
              "data": {"level": value, "nested": {"level": value}}}
    out = redacted_event(Redactor().redact_obj, record)
    assert SECRET not in _shown(out["data"]["level"]) + _shown(out["data"]["nested"]["level"])
    assert SECRET not in _shown(Redactor().redact_obj({"level": value})["level"])


class Number(int):
    """A subclass showing its value, as ``numpy.float64`` shows its own."""


def test_a_subclass_showing_no_secret_or_only_its_value_is_kept_as_its_figure() -> None:
    # (Since lane S, eighteenth stop: as its exact type, the value JSON writes; its own methods never read.)
    card = 4111111111111111  # (its digits are a card number to the patterns: a figure all the same, as an int)
    out = Redactor().redact_obj({"level": Plain.LOW, "n": 3, "card": Number(card), "exact": card})
    assert type(out["level"]) is int and out["level"] == 1 and out["n"] == 3
    assert type(out["card"]) is int and out["card"] == card == out["exact"]


def test_bulk_redaction_reads_a_subclass_as_one_message_alone_does() -> None:
    messages = [Message.user(f"note {i} {NONCE}", meta={"level": Level.LOW} if i == 3 else {"n": i})
                for i in range(8)]
    alone = [Redactor().redact_message(m) for m in messages]
    bulk = Redactor().redact_messages(messages)
    assert bulk == alone
    assert SECRET not in repr([dict(m.meta) for m in bulk])


class Colour(enum.Enum):
    KEY = f"token {SECRET}"


HELD_AS_TEXT: dict[str, Any] = {
    "path": PurePosixPath(f"/srv/{SECRET}/x"),
    "enum": Colour.KEY,
    "fraction": Fraction(7, 3),
    "ip": ipaddress.ip_address("10.20.30.40"),
}


@pytest.mark.parametrize("kind", sorted(HELD_AS_TEXT))
def test_meta_values_held_as_text_are_redacted(kind: str) -> None:
    value = HELD_AS_TEXT[kind]
    m = Message.user(f"note {NONCE}", meta={"value": value, "password": value})
    assert type(m.meta["value"]) is str  # (held as its text)
    redactor = Redactor()
    out = redactor.redact_message(m)
    written = json.dumps(dict(out.meta))
    assert SECRET not in written
    assert out.meta["password"].startswith("[REDACTED")  # (under a secret-named key: the whole text is the secret)
    assert Redactor().redact_messages([m]) == [out]
