"""Red team (issue 21 §1): ``contextfold replay --dump-views`` writes the views with their secrets in clear.

Every other file the command line writes is redacted (``--json``, ``--html``, ``archive restore``, ``compact`` with
``--no-redact`` to opt out), but the views dumped for inspection carry a credential of the recorded session as it
was. Found on 5894f4b.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from contextfold.cli import main

SECRET = "Zq7hQ2rVx9LmT4kPw8"


def test_dumped_views_are_redacted(tmp_path: Path) -> None:
    items = [{"role": "user", "content": "Set up the database."}]
    for turn in range(3):
        call = {"id": f"call_{turn}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"cmd": f"cat config{turn}.env"})}}
        items += [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": f"call_{turn}",
                   "content": f"DB_HOST=db{turn}.internal\nDB_PASSWORD={SECRET}\nDB_PORT=5432"}]
    items.append({"role": "assistant", "content": "Configured."})
    recorded = tmp_path / "session.jsonl"
    recorded.write_text("".join(json.dumps(item) + "\n" for item in items))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["replay", str(recorded), "--window", "4000", "--dump-views", str(tmp_path / "views"),
                     "--jobs", "1", "--json"]) == 0
    dumped = sorted((tmp_path / "views").rglob("*.jsonl"))
    assert dumped
    assert [p.name for p in dumped if SECRET in p.read_text()] == []
