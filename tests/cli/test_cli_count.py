"""``contextfold count``, run in-process through ``main``."""

from __future__ import annotations

import json

import pytest
from conftest import TRAJECTORIES, require

from contextfold.cli import main
from contextfold.importers._files import load_session, load_sessions

CLAUDE = TRAJECTORIES / "sweagent-claude4sonnet"
ONE = CLAUDE / "sympy__sympy-19954.traj"


@pytest.fixture(autouse=True)
def _data() -> None:
    require(CLAUDE.is_dir(), f"shared data not found at {TRAJECTORIES}")


def test_count_json_one_session(capsys: pytest.CaptureFixture[str]) -> None:
    from contextfold.tokens import counter_for_model

    assert main(["count", str(ONE), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    result = json.loads(out)
    session = load_session(ONE)
    expected = counter_for_model("gpt-4o", format="openai_chat").count_messages(session.messages)
    assert result == {"messages": 60, "tokens": expected}
    assert expected > 10_000, "a SWE-agent session is tens of thousands of tokens"


def test_count_json_folder_has_per_session_figures_that_add_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["count", str(CLAUDE), "--json", "--model", "gpt-4.1"]) == 0
    result = json.loads(capsys.readouterr().out)
    ids = [s.id for s in load_sessions(CLAUDE)]
    assert [row["id"] for row in result["sessions"]] == ids
    assert result["messages"] == sum(row["messages"] for row in result["sessions"]) == 54 + 60 + 72
    assert result["tokens"] == sum(row["tokens"] for row in result["sessions"])


def test_count_model_changes_the_tokenizer(capsys: pytest.CaptureFixture[str]) -> None:
    main(["count", str(ONE), "--json", "--model", "gpt-4o"])
    o200k = json.loads(capsys.readouterr().out)["tokens"]
    main(["count", str(ONE), "--json", "--model", "gpt-4"])
    cl100k = json.loads(capsys.readouterr().out)["tokens"]
    assert o200k != cl100k


def test_count_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["count", str(CLAUDE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["session", "messages", "tokens"]
    assert [line.split()[0] for line in lines[1:4]] == [p.stem for p in sorted(CLAUDE.glob("*.traj"))]
    assert lines[-1].startswith("total (3 sessions)")
    assert int(lines[-1].split()[-2]) == 54 + 60 + 72


def test_help_texts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "count" in out and "convert" in out
    for command in ("count", "convert"):
        assert main([command, "--help"]) == 0
        assert "SESSION" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("contextfold ")
