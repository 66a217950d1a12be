"""A batch of events redacted by a redactor: their short strings cleared in one pass, secrets still redacted.

Each event's span ids and times are its own: scanned one by one they cost ~0.2 ms an event, and the 574 events of a
bulk add's write-time cuts took 0.1 s of CPU during the next ``prepare()`` (issue 22).
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.exporters.base import InMemoryExporter
from contextfold.redact import Redactor
from contextfold.telemetry import BatchProcessor, CompactWarning

_NONCE = "q7c2m9"  # (texts of this test only: no cache of another test's can answer for them)
_EVENTS = 40
_PATIENCE_S = 10.0  # (a generous bound: only a broken processor takes this long)


def _events(secret_at: int) -> list[CompactWarning]:
    return [CompactWarning(message=(f"step {_NONCE}-{i} password={_NONCE}Zx81kQ{i}" if i == secret_at
                                    else f"step {_NONCE}-{i} done"), session_id=f"s-{_NONCE}", code=f"c{i}")
            for i in range(_EVENTS)]


def _export(redact: Any, events: list[CompactWarning]) -> list[dict[str, Any]]:
    exporter = InMemoryExporter()
    processor = BatchProcessor(exporter, redact=redact)
    try:
        for event in events:
            processor.emit(event)
        assert processor.flush(_PATIENCE_S)
    finally:
        processor.shutdown()
    return list(exporter.events)


def test_a_batch_of_events_is_not_scanned_string_by_string(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()  # (the archive's events file's hook; for_telemetry's personal data suspects more strings)
    scanned: list[str] = []
    spans = Redactor.spans

    def counting(self: Redactor, text: str) -> Any:
        scanned.append(text)
        return spans(self, text)

    monkeypatch.setattr(Redactor, "spans", counting)
    events = _export(redactor.redact_obj, _events(secret_at=7))
    # Only the one string holding a trigger is scanned (each event's own span id and times were, one by one).
    assert len(scanned) <= 2, scanned
    assert all("password" in text for text in scanned)
    assert f"{_NONCE}Zx81kQ7" not in str(events)  # (the secret, in the event's text: redacted)
    assert [e["data"]["message"] for e in events][:3] == [f"step {_NONCE}-{i} done" for i in range(3)]


@pytest.mark.parametrize("outgoing", [False, True])
def test_cleared_in_bulk_equals_redacted_one_by_one(outgoing: bool) -> None:
    events = _events(secret_at=3)
    redactor, alone = (Redactor().for_telemetry(), Redactor().for_telemetry()) if outgoing else (Redactor(), Redactor())
    bulk = _export(redactor.redact_obj, events)
    one_by_one = _export(lambda record: alone.redact_obj(record), events)  # (not a redactor's method: no clearing)
    assert bulk == one_by_one
    assert "[REDACTED:password]" in bulk[3]["data"]["message"]


def test_a_key_naming_a_secret_is_redacted_inside_the_clearing() -> None:
    # A short value the prefilter clears (no trigger in it) is still a secret when its key says so.
    redactor = Redactor().for_telemetry()
    records = [{**CompactWarning(message=f"m{i}", session_id=f"s-{_NONCE}").to_dict(),
                "data": {"api_key": f"plain{_NONCE}{i}", "note": f"n{i}"}} for i in range(_EVENTS)]
    exporter = InMemoryExporter()
    processor = BatchProcessor(exporter, redact=redactor.redact_obj)
    try:
        for record in records:
            processor.emit(record)
        assert processor.flush(_PATIENCE_S)
    finally:
        processor.shutdown()
    assert all(e["data"]["api_key"].startswith("[REDACTED") for e in exporter.events)
    assert [e["data"]["note"] for e in exporter.events] == [f"n{i}" for i in range(_EVENTS)]


def test_a_clearing_that_fails_leaves_each_event_redacted_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(self: Redactor, texts: Any) -> Any:
        raise RuntimeError("prefilter")

    monkeypatch.setattr(Redactor, "clearing", failing)
    events = _export(Redactor().redact_obj, _events(secret_at=5))
    assert len(events) == _EVENTS
    assert f"{_NONCE}Zx81kQ5" not in str(events)
    assert "[REDACTED:password]" in events[5]["data"]["message"]
