"""``contextfold replay`` exports a recorded session's events when telemetry is configured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.cli import main


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_replay_exports_to_the_named_exporter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "events.jsonl"
    assert main(["replay", "--demo", "--jobs", "1", "--telemetry", f"jsonl:{out}"]) == 0
    events = _events(out)
    names = [e["name"] for e in events]
    trace = [e for e in events if e["name"] == "session.trace"]
    assert len(trace) >= 2 and trace[-1]["data"]["finished"] is True
    assert trace[-1]["data"]["metadata"]["model"] == "gpt-4o"
    calls = [e for e in events if e["name"] == "prepare"]
    table = capsys.readouterr().out
    assert calls and f"{len(calls)}" in table  # one call span per replayed model call
    assert "compact.summarize" in names and "compact.summary_created" in names
    spans = {e["span_id"]: e for e in events}
    for summarize in (e for e in events if e["name"] == "compact.summarize"):
        compaction = spans[summarize["parent_id"]]
        assert compaction["name"].startswith("compact.") and spans[compaction["parent_id"]]["name"] == "prepare"


def test_replay_takes_the_exporters_from_the_policy_file(tmp_path: Path) -> None:
    out = tmp_path / "from-config.jsonl"
    config = tmp_path / "contextfold.yaml"
    config.write_text(f"telemetry:\n  exporters: [jsonl]\n  jsonl_path: {out}\n", encoding="utf-8")
    assert main(["replay", "--demo", "--jobs", "1", "--policy", str(config)]) == 0
    assert any(e["name"] == "session.trace" for e in _events(out))


def test_an_unknown_exporter_is_named_before_any_replay(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--demo", "--jobs", "1", "--telemetry", "carrier-pigeon"]) != 0
    captured = capsys.readouterr()
    assert captured.err.startswith("contextfold: telemetry.exporter: unknown exporter 'carrier-pigeon'")
    assert captured.out == ""  # nothing was replayed
