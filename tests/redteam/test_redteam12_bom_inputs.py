"""A session file or replay JSON that opens with a UTF-8 byte order mark is read like the same file without it.

Found by the twelfth red team (the CLI on hostile input files): Windows PowerShell 5's ``Out-File -Encoding utf8``,
Notepad's older "UTF-8" and many Windows exporters write a BOM first. ``contextfold count/replay/compact/convert``
refused such a session ("record 0 (line 1): invalid JSON: Unexpected UTF-8 BOM") and ``contextfold report`` such a
replay JSON: the whole file, for three invisible bytes. Now the mark is skipped (any other byte is as before).
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from contextfold.cli import main
from contextfold.importers import load_session

NONCE = "rt12-bom-8Fz4"
HISTORY = [{"role": "user", "content": f"read the log {NONCE}"}, {"role": "assistant", "content": "It failed."}]


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_session_file_with_a_bom_loads_like_one_without(tmp_path: Path, suffix: str) -> None:
    text = "".join(json.dumps(m) + "\n" for m in HISTORY) if suffix == ".jsonl" else json.dumps(HISTORY)
    plain, marked = tmp_path / f"plain{suffix}", tmp_path / f"marked{suffix}"
    plain.write_text(text, encoding="utf-8")
    marked.write_bytes(codecs.BOM_UTF8 + text.encode("utf-8"))
    assert [m.text for m in load_session(marked).messages] == [m.text for m in load_session(plain).messages]


def test_the_cli_counts_a_session_file_with_a_bom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(codecs.BOM_UTF8 + "".join(json.dumps(m) + "\n" for m in HISTORY).encode("utf-8"))
    assert main(["count", str(marked)]) == 0
    assert "marked" in capsys.readouterr().out


def test_the_report_reads_a_replay_json_with_a_bom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--demo", "--json", "--no-progress"]) == 0
    marked = tmp_path / "marked.json"
    marked.write_bytes(codecs.BOM_UTF8 + capsys.readouterr().out.encode("utf-8"))
    assert main(["report", str(marked), "-o", str(tmp_path / "report.html")]) == 0
    assert (tmp_path / "report.html").stat().st_size > 0
