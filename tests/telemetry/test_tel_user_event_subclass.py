"""A caller's ``Event`` subclass is not taken as built by contextfold: its record is exported as a copy.

The processor passes a record of its own event classes on as it is when its redactor kept every string of it before
(issue 22: no redaction pass for a no-op ``prepare()``'s events): those records are new dicts made from frozen values.
A caller's subclass may make its record its own way; one that hands over a dict it keeps was exported as that very
object, so what the caller changed afterwards (a secret written into it) changed what had been exported.
"""

from __future__ import annotations

from typing import Any

from contextfold.exporters.base import BaseExporter
from contextfold.redact import Redactor
from contextfold.telemetry import BatchProcessor, TokenEstimate

NONCE = "u5ev2k"
SECRET = f"ghp_{NONCE}Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6"


class KeptRecord(TokenEstimate):
    """A caller's estimate that makes its record once and hands the same dict over every time."""

    def to_dict(self) -> dict[str, Any]:
        record = _KEPT.get(self.span_id)
        if record is None:
            record = _KEPT[self.span_id] = TokenEstimate.to_dict(self)
        return record


_KEPT: dict[str, dict[str, Any]] = {}


class Holding(BaseExporter):
    """Keeps the records exactly as the processor handed them over (an exporter that sends later)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def export(self, batch: list[dict[str, Any]]) -> None:
        self.records.extend(batch)


def _estimate(cls: type[TokenEstimate]) -> TokenEstimate:
    return cls(system=1, developer=0, tools_schema=2, messages=30, model=f"model-{NONCE}", context_window=1000,
               session_id=f"s-{NONCE}")


def test_a_callers_subclass_record_is_exported_as_a_copy_it_cannot_change_later() -> None:
    exporter = Holding()
    processor = BatchProcessor(exporter, redact=Redactor().redact_obj)
    try:
        processor.emit(_estimate(TokenEstimate))  # (its strings kept by the redactor: remembered as clean)
        assert processor.flush(10.0)
        event = _estimate(KeptRecord)
        processor.emit(event)
        assert processor.flush(10.0)
    finally:
        processor.shutdown()
    kept = _KEPT[event.span_id]
    exported = exporter.records[-1]
    assert exported is not kept and exported["data"] is not kept["data"]
    kept["data"]["model"] = f"token {SECRET}"  # (the caller's own dict, written after the export)
    assert exported["data"]["model"] == f"model-{NONCE}"
    assert SECRET not in repr(exporter.records)

