"""Thresholds and warnings as the design documents give them (002 §Phase 1-2, 004 §2, 000 §Risks)."""

from __future__ import annotations

import logging

import pytest

from contextfold import ContextManager
from contextfold.telemetry import RecordingTelemetry


def _manager(sink: RecordingTelemetry, **policy: object) -> ContextManager:
    return ContextManager("gpt-4o", store="memory", archive="memory", telemetry=sink, policy=policy or None)


def test_an_input_over_256_kb_is_logged_and_reported(caplog: pytest.LogCaptureFixture) -> None:
    sink = RecordingTelemetry()
    cm = _manager(sink)
    try:
        with caplog.at_level(logging.WARNING, logger="contextfold"):
            cm.add({"role": "user", "content": "x" * (256 * 1024)})  # exactly the limit: fine
            cm.add({"role": "user", "content": "é" * (128 * 1024 + 1)})  # 2 bytes each: one byte over
        warnings = [e for e in sink.events if e.name == "compact.warning" and e.code == "large_input"]
        assert len(warnings) == 1
        assert "262,146 bytes, over the 262,144-byte input limit" in warnings[0].message
        assert [r.getMessage() for r in caplog.records] == [warnings[0].message]
    finally:
        cm.close()


def test_the_input_limit_is_a_policy_field() -> None:
    sink = RecordingTelemetry()
    cm = _manager(sink, large_input_bytes=10)
    try:
        cm.add({"role": "user", "content": "eleven byte"})
        assert [e.code for e in sink.events if e.name == "compact.warning"] == ["large_input"]
    finally:
        cm.close()
