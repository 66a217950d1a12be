"""Files ``compact -o`` and ``convert --out-dir`` write are the owner's alone, as ``archive restore``'s are.

Found on afa4c7c (red team, session 19): both wrote with the process's umask (0644 under the usual 022), so on a
shared machine every user could read them, while ``archive restore`` writes its history 0600 because it holds whole
tool outputs (file contents, command output), as do these: a compacted history keeps its recent turns' outputs
whole (with ``--no-redact``, their secrets too), and a converted session is the whole session. An existing file
written over keeps no wider mode either.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextfold.cli import main

SECRETISH = "DB_PASSWORD=hunter2-not-a-real-one"


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _session(tmp_path: Path) -> Path:
    path = tmp_path / "s1.jsonl"
    items = [{"role": "user", "content": "show the env"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"env\"}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": f"HOME=/root\n{SECRETISH}\n"},
             {"role": "assistant", "content": "done"}]
    path.write_text("\n".join(json.dumps(i) for i in items), encoding="utf-8")
    return path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_compact_output_is_the_owners(tmp_path: Path) -> None:
    out = tmp_path / "compacted.jsonl"
    args = ["compact", str(_session(tmp_path)), "-o", str(out), "--store", "memory", "--archive",
            str(tmp_path / "archive"), "--no-redact"]
    assert main(args) == 0
    assert _mode(out) == 0o600
    assert SECRETISH in out.read_text(encoding="utf-8")  # what makes it sensitive
    out.chmod(0o644)
    assert main(args) == 0
    assert _mode(out) == 0o600


def test_convert_outputs_are_the_owners(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    assert main(["convert", str(_session(tmp_path)), "--to", "anthropic", "--out-dir", str(folder)]) == 0
    written = folder / "s1.jsonl"
    assert _mode(written) == 0o600
    assert SECRETISH in written.read_text(encoding="utf-8")
    written.chmod(0o644)
    assert main(["convert", str(_session(tmp_path)), "--to", "anthropic", "--out-dir", str(folder)]) == 0
    assert _mode(written) == 0o600
