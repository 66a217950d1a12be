"""The telemetry thread asks our redactor about an event's repeated short strings once per redactor state.

A no-op ``prepare()``'s two events carry the same names, kinds, status and model on every call; each went through
the key rule (~2 us) on the telemetry thread (issue 22, eighteenth session, lane N). The count fails on 08dd6b2. What
is kept stands only while the redactor's state is the same: a secret learned later, or by an earlier item of the same
event, is redacted where a kept string holds it.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.exporters.base import InMemoryExporter
from contextfold.redact import Redactor
from contextfold.telemetry import BatchProcessor, CustomEvent, TokenEstimate, Tracer

NONCE = "k4e9tq"
SECRET = f"Zx81{NONCE}Qv7mW2pL0sN4"


def _asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    asked: list[tuple[str, Any]] = []
    real = Redactor._redact_item

    def counted(self: Redactor, key: str, value: Any) -> Any:
        asked.append((key, value))
        return real(self, key, value)

    monkeypatch.setattr(Redactor, "_redact_item", counted)
    return asked


def _exported(redactor: Redactor, *steps: Any) -> list[dict[str, Any]]:
    """The events ``steps`` emit, each step's exported (redacted) before the next one runs."""
    processor = BatchProcessor(InMemoryExporter(), redact=redactor.redact_obj)
    tracer = Tracer(f"s-{NONCE}", processor)
    try:
        for step in steps:
            step(tracer)
            assert processor.flush()
        return processor.exporter.events  # type: ignore[attr-defined, no-any-return]
    finally:
        processor.shutdown()


def _notes(tracer: Tracer) -> None:
    for n in range(10):
        tracer.emit_new(CustomEvent, event="note", attributes={"n": n, "note": f"uses {SECRET} now"})


def test_a_repeated_string_is_asked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _asked(monkeypatch)

    def estimates(tracer: Tracer) -> None:
        for n in range(40):
            tracer.emit_new(TokenEstimate, messages=n, tools_schema=0, system=0, developer=0, model=f"m-{NONCE}",
                            context_window=1000)

    events = _exported(Redactor(), estimates)
    assert [e["data"]["model"] for e in events] == [f"m-{NONCE}"] * 40
    assert [v for k, v in asked if k == "model"] == [f"m-{NONCE}"]  # (08dd6b2: 40)


def test_a_secret_learned_later_is_redacted_in_a_kept_string() -> None:
    redactor = Redactor()

    def learned(tracer: Tracer) -> None:
        redactor.learn(SECRET, "api_key")
        tracer.emit_new(CustomEvent, event="note", attributes={"n": 10, "note": f"uses {SECRET} now"})

    notes = [e["data"]["note"] for e in _exported(redactor, _notes, learned)]
    assert notes[:10] == [f"uses {SECRET} now"] * 10
    assert SECRET not in notes[10] and "[REDACTED" in notes[10]


def test_a_secret_an_earlier_item_names_is_redacted_in_a_kept_string() -> None:
    redactor = Redactor()

    def named(tracer: Tracer) -> None:
        # (the key names the value a secret: learned as this event is redacted, before its note is asked)
        tracer.emit_new(CustomEvent, event="note", attributes={"api_key": SECRET, "note": f"uses {SECRET} now"})

    exported = _exported(redactor, _notes, named)
    assert [e["data"]["note"] for e in exported[:10]] == [f"uses {SECRET} now"] * 10
    last = exported[-1]["data"]
    assert SECRET not in last["api_key"] and SECRET not in last["note"]
