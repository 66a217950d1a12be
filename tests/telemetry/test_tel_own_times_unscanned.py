"""An event's times, written by our clock's ``format_time``, are left out by a contextfold redactor as its ids are.

Left open at the fifteenth stop (lane T left the ids out, not the times). They are the tracer's clock read when the
event was emitted, of one exact shape (digits and fixed punctuation): a user's date pattern or a remembered secret of
digits that matched one cut the event's time (and which times it cut told the secret's digits). A value in their
place of any other shape, the event's other values, a user's own hook and a redactor with a callback are as before.
"""

from __future__ import annotations

from typing import Any

from contextfold.redact import Redactor
from contextfold.telemetry import CompactWarning
from contextfold.telemetry._session_redaction import redacted_event, unscanned
from contextfold.telemetry.processor import _clearing

_NONCE = "r16t7z"
_TIMES = {"started_at": "2026-11-27T13:05:41.123456Z", "ended_at": "2026-11-27T13:05:41.223456Z"}
_DATES = {"dates": r"\d{4}-\d{2}-\d{2}"}  # (an operator's pattern for dates in what users write)


def _record(**data: Any) -> dict[str, Any]:
    record = {**CompactWarning(message=f"tool {_NONCE} failed on 2026-01-02", session_id=f"s-{_NONCE}").to_dict(),
              **_TIMES}
    record["data"] = {**record["data"], **data}
    return record


def test_a_date_pattern_leaves_an_events_own_times_alone() -> None:
    out = redacted_event(Redactor(patterns=_DATES).redact_obj, _record())
    assert {k: out[k] for k in _TIMES} == _TIMES  # (cut to "[REDACTED:dates]T13:05:41..." before)
    assert "2026-01-02" not in str(out["data"])  # (the message's date is the user's: still redacted)


def test_a_time_not_of_our_shape_is_redacted() -> None:
    record = {**_record(), "started_at": f"2026-11-27 password={_NONCE}Zq81kW"}
    out = redacted_event(Redactor().redact_obj, record)
    assert f"{_NONCE}Zq81kW" not in out["started_at"]


def test_the_bulk_clearing_does_not_read_the_times() -> None:
    redactor = Redactor()
    given: list[list[str]] = []
    clearing = redactor.clearing

    def spy(strings: list[str]) -> Any:
        given.append(list(strings))
        return clearing(strings)

    redactor.clearing = spy  # type: ignore[method-assign]
    records = [(record, unscanned(record)) for record in (_record(n=n) for n in range(8))]
    with _clearing(redactor.redact_obj, records):
        pass
    assert given and not set(_TIMES.values()) & set(given[0])


def test_a_users_hook_and_a_callback_still_see_the_times() -> None:
    def hook(record: dict[str, Any]) -> dict[str, Any]:
        return {**record, "started_at": "2026-11-27T13:00:00Z"}  # (an operator coarsening times: kept)

    assert redacted_event(hook, _record())["started_at"] == "2026-11-27T13:00:00Z"
    called: list[str] = []

    def callback(text: str) -> str:
        called.append(text)
        return text

    redacted_event(Redactor(callback=callback).redact_obj, _record())
    assert set(_TIMES.values()) <= set(called)
