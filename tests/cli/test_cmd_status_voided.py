"""``contextfold status`` counts the events that hold: those a rolled-back ``add()`` voided are counted apart.

Left by the nineteenth stop: the replay honoured ``AddRolledBack.voided``, but ``status`` counted every line of a
session's events file, so a session whose add failed and was retried showed the failed add's cuts and warnings as
well as the retry's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rollback_setups import StoreFailingOnOutput, two_large_outputs

from contextfold import ContextManager
from contextfold.cli import main
from contextfold.errors import StoreError

NONCE = "s20dstv"


def _session(archive: Path, session_id: str, *, fail_first: bool) -> None:
    """A session given two large outputs in one add; with ``fail_first`` that add fails once and is retried."""
    store = StoreFailingOnOutput(NONCE)
    cm = ContextManager(model="gpt-4o", max_context_tokens=3000, store=store, archive=str(archive),
                        session_id=session_id, message_id_prefix="m", policy={"large_input_bytes": 8192})
    cm.add([{"role": "system", "content": f"system {NONCE}"}, {"role": "user", "content": f"task {NONCE}"}])
    batch = two_large_outputs(NONCE)
    if fail_first:
        store.fail_on = 2
        with pytest.raises(StoreError):
            cm.add(batch)
    cm.add(batch)
    cm.prepare()
    cm.close()


def _rows(archive: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    capsys.readouterr()
    assert main(["status", "--archive", str(archive), "--json"]) == 0
    return {row["session"]: row for row in json.loads(capsys.readouterr().out)["sessions"]}


def test_status_leaves_out_the_events_a_rolled_back_add_voided(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "archive"
    _session(archive, "clean", fail_first=False)
    _session(archive, "retried", fail_first=True)
    rows = _rows(archive, capsys)
    # The retried session holds what the clean one holds, and the rollback's own event (it says the add failed).
    assert rows["retried"]["events"] == rows["clean"]["events"] + 1
    assert rows["retried"]["voided_events"] == 3  # (the first output's cut, both outputs' large-input warnings)
    assert rows["clean"]["voided_events"] == 0
