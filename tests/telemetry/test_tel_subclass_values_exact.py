"""An event's ``str``, ``int`` and ``float`` of a subclass are redacted, and written, as their exact type.

Review of 674ab2e: redaction read a subclass's ``str()`` and ``format(value)`` (the empty spec) and kept it as itself
when those showed no secret. One that shows a secret for another spec (a sink writing ``f"{value:>8}"``) or whose
text's ``__ne__`` lies passed as itself, and the sink wrote the secret. Made its exact type first, it writes its
value whatever the sink does; the figures and the JSON are the same.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest

from contextfold.redact import Redactor
from contextfold.telemetry import TokenEstimate
from contextfold.telemetry._session_redaction import redacted_event

NONCE = "f1exct8w"
SECRET = f"ghp_{NONCE}a1B2c3D4e5F6g7H8i9J0k1L2m3N4"


class Level(enum.IntEnum):
    LOW = 1

    def __format__(self, spec: str) -> str:
        return f"low token {SECRET}" if spec else int.__repr__(self)


class Ratio(float):
    def __format__(self, spec: str) -> str:
        return f"ratio token {SECRET}" if spec else float.__repr__(self)


class Liar(str):
    """A text showing a secret, that says it differs from everything (so it looks redacted already)."""

    def __str__(self) -> str:
        return f"tag token {SECRET}"

    def __format__(self, spec: str) -> str:
        return f"tag token {SECRET}"

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class Count(int):
    """A figure of a caller's type."""


_EVENT = TokenEstimate(system=0, developer=0, tools_schema=0, messages=1, session_id=f"s-{NONCE}").to_dict()


def _record(data: dict[str, Any]) -> dict[str, Any]:
    return {**_EVENT, "data": data}


def _written(value: Any) -> str:
    return f"{value} {value!s} {value!r} {value:>8} {value:<3}"


def _hook(record: dict[str, Any]) -> dict[str, Any]:
    """A caller's own redaction hook (the event as given)."""
    return record


@pytest.mark.parametrize("redact", [Redactor().redact_obj, _hook], ids=["redactor", "hook"])
@pytest.mark.parametrize("value", [Level.LOW, Ratio(0.5), Liar("plain")], ids=["int-enum", "float", "str-ne"])
def test_a_subclass_showing_a_secret_as_a_sink_formats_it_is_written_as_its_value(redact: Any, value: Any) -> None:
    out = redacted_event(redact, _record({"value": value, "nested": {"in": [value, (value,)]}}))
    written = [out["data"]["value"], out["data"]["nested"]["in"][0], out["data"]["nested"]["in"][1][0]]
    for shown in written:
        assert SECRET not in _written(shown)  # 1c2b5ec: kept as the subclass, whose formatting writes the secret
        assert type(shown) in (int, float, str)


def test_the_figures_and_the_json_are_the_same() -> None:
    huge = 10**5000
    given = {"level": Level.LOW, "ratio": Ratio(0.5), "tag": Liar("plain"), "count": Count(7), "huge": Count(huge),
             "list": [Count(3), "x", 2.5]}
    exact = {"level": 1, "ratio": 0.5, "tag": "plain", "count": 7, "huge": huge, "list": [3, "x", 2.5]}
    out = redacted_event(Redactor().redact_obj, _record(given))
    assert out["data"] == exact
    assert [type(v) for v in out["data"].values()] == [type(v) for v in exact.values()]
    clean = redacted_event(Redactor().redact_obj, _record(exact))
    assert json.dumps({**out, "data": {**out["data"], "huge": 0}}) == \
        json.dumps({**clean, "data": {**clean["data"], "huge": 0}})


def test_a_secret_named_key_still_hides_a_subclass_text() -> None:
    out = redacted_event(Redactor().redact_obj, _record({"api_key": Liar(f"k{NONCE}Zq81kWx7Lm")}))
    assert out["data"]["api_key"].startswith("[REDACTED")
