"""``contextfold convert``: a recorded session as JSONL in every wire format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import TRAJECTORIES, require

from contextfold.cli import main
from contextfold.importers._files import load_session, load_sessions

CLAUDE = TRAJECTORIES / "sweagent-claude4sonnet"
LM32B = TRAJECTORIES / "sweagent-lm32b" / "astropy__astropy-12907.traj"
TAU = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"
FORMATS = ("openai_chat", "openai_responses", "anthropic", "gemini")


@pytest.fixture
def formats() -> Any:
    try:
        from contextfold import formats
    except ImportError:
        formats = None
    require(formats is not None and hasattr(formats, "get_format"), "contextfold.formats is not there yet")
    require(TRAJECTORIES.is_dir(), "shared data missing")
    return formats


def _items(out: str) -> list[dict[str, Any]]:
    lines = out.splitlines()
    assert all(line.strip() for line in lines)
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("target", FORMATS)
@pytest.mark.parametrize("path", [LM32B, CLAUDE / "sympy__sympy-19954.traj"], ids=["text_calls", "native_calls"])
def test_convert_writes_jsonl_that_decodes_to_the_same_pairs(
    formats: Any, capsys: pytest.CaptureFixture[str], target: str, path: Path
) -> None:
    assert main(["convert", str(path), "--to", target]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    items = _items(out)
    formats.get_format(target).validate(items)
    decoded = formats.get_format(target).decode(items)
    session = load_session(path)
    calls = [(c.name, c.parsed_arguments()) for m in session.messages for c in m.tool_calls]
    assert [(c.name, c.parsed_arguments()) for m in decoded for c in m.tool_calls] == calls
    assert sum(m.role == "tool" for m in decoded) == len(calls)


def test_convert_to_its_own_format_gives_back_the_recording(formats: Any, capsys: pytest.CaptureFixture[str]) -> None:
    raw = json.loads(TAU.read_text())
    assert main(["convert", str(TAU), "--to", "openai_chat", "--session", "gpt-4o-airline/5-2"]) == 0
    (entry,) = [e for e in raw if (e["task_id"], e["trial"]) == (5, 2)]
    assert _items(capsys.readouterr().out) == entry["traj"]


def test_several_sessions_need_a_choice(formats: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["convert", str(CLAUDE), "--to", "anthropic"]) == 2
    err = capsys.readouterr().err
    choice = "pick one with --session ID or write all with --out-dir DIR"
    assert err == f"contextfold: {CLAUDE}: holds 3 sessions: {choice}\n"
    assert main(["convert", str(CLAUDE), "--to", "anthropic", "--session", "nope"]) == 2
    assert "no session with id 'nope'" in capsys.readouterr().err

    assert main(["convert", str(CLAUDE), "--to", "gemini", "--out-dir", str(tmp_path / "out")]) == 0
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == [f"{s.id}.jsonl" for s in load_sessions(CLAUDE)]
    # What convert writes, the importers read back (format auto-detected).
    back = load_sessions(tmp_path / "out")
    assert {s.format for s in back} == {"gemini"}
    assert [len([c for m in s.messages for c in m.tool_calls]) for s in back] == [
        len([c for m in s.messages for c in m.tool_calls]) for s in load_sessions(CLAUDE)
    ]


def test_out_dir_for_tau_bench_ids_with_slashes(formats: Any, tmp_path: Path) -> None:
    assert main(["convert", str(TAU), "--to", "anthropic", "--out-dir", str(tmp_path)]) == 0
    files = sorted((tmp_path / "gpt-4o-airline").glob("*.jsonl"))
    assert len(files) == 200


def test_the_choices_are_the_formats_package(formats: Any) -> None:
    from contextfold.cli.convert import WIRE_FORMATS

    assert sorted(WIRE_FORMATS) == sorted(formats.FORMATS)
