"""``contextfold replay``: the main job end to end, its options, and bad input as one line with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TRAJECTORIES, require

from contextfold.cli import main

CLAUDE = TRAJECTORIES / "sweagent-claude4sonnet"
REQUIRED_KEYS = {
    "sessions", "turns", "valid_rate", "needed_fact_recall", "recoverable_fact_recall", "tokens_sent",
    "tokens_sent_baseline", "cost_usd", "cost_usd_cached", "compactions", "maskings", "prepare_ms_median",
    "prepare_ms_p99", "per_session",
}


def _claude(name: str = "matplotlib__matplotlib-24970.traj") -> Path:
    path = CLAUDE / name
    require(path.is_file(), f"shared data not found: {path}")
    return path


def test_the_readme_main_job_runs_end_to_end(tmp_path: Path) -> None:
    """`contextfold replay --demo --html contextfold-report.html`, as a user runs it: a fresh process."""
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "replay", "--demo", "--html", "contextfold-report.html"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == 0, done.stderr
    report = tmp_path / "contextfold-report.html"
    assert report.stat().st_size > 10_000 and "<svg" in report.read_text(encoding="utf-8")
    assert done.stdout.startswith("session") and "django__django-13590" in done.stdout
    assert "wrote the report to contextfold-report.html" in done.stderr
    assert not (tmp_path / ".contextfold").exists()  # the demo keeps its stores in memory


def test_demo_json_has_the_promised_keys_and_shows_masking_and_compaction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["replay", "--demo", "--json", "--jobs", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == 1
    result = json.loads(out)
    assert set(result) >= REQUIRED_KEYS
    assert result["window"] == 8_000 and result["model"] == "gpt-4o"
    assert result["valid_rate"] == 1.0
    assert result["compactions"] >= 1 and result["maskings"] >= 1
    assert result["tokens_sent"] < result["tokens_sent_baseline"]
    assert result["cost_usd_cached"] < result["cost_usd"]
    session = result["per_session"][0]
    assert len(session["series"]) == result["turns"] and session["thresholds"]["window"] == 8_000
    assert err.startswith("session")  # the table goes to stderr when stdout carries JSON


def test_dump_views_writes_one_file_per_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _claude()
    dump = tmp_path / "views"
    assert main(["replay", str(path), "--window", "16000", "--dump-views", str(dump), "--json", "--format",
                 "anthropic"]) == 0
    result = json.loads(capsys.readouterr().out)
    turns = [t["turn"] for t in result["per_session"][0]["series"]]
    files = sorted(int(p.stem) for p in (dump / path.stem).glob("*.jsonl"))
    assert files == turns
    first = [json.loads(x) for x in (dump / path.stem / f"{turns[-1]}.jsonl").read_text().splitlines()]
    assert first[0]["role"] == "system" and any(isinstance(i.get("content"), list) for i in first)
    assert result["format"] == "anthropic" and result["valid_rate"] == 1.0


def test_a_policy_file_sets_the_thresholds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("max_context_tokens: 20000\npolicy:\n  trigger_pct: 0.5\n  keep_recent_turns: 3\n")
    assert main(["replay", str(_claude()), "--policy", str(policy), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["window"] == 20_000 and result["policy"] == {"trigger_pct": 0.5, "keep_recent_turns": 3}
    assert result["per_session"][0]["thresholds"]["hard"] == 10_000


def test_a_folder_in_parallel_with_a_forced_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    require(CLAUDE.is_dir(), f"shared data not found: {CLAUDE}")
    assert main(["replay", str(CLAUDE), "--window", "16000", "--jobs", "2", "--progress"]) == 0
    out, err = capsys.readouterr()
    assert "\r[" in err and "3/3 sessions" in err
    assert out.splitlines()[-1].startswith("total (3 sessions)")


def _bad_traj(tmp_path: Path) -> Path:
    path = tmp_path / "broken.traj"
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]
    path.write_text(json.dumps({"history": history}))
    return path


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["replay", "{bad}"], 2, "contextfold: {bad}: record 2: role: unknown role 'robot'"),
        (["replay"], 2, "contextfold: SESSION: missing: give a session file or folder, or --demo"),
        (["replay", "{bad}", "--demo"], 2, "contextfold: SESSION: give a SESSION or --demo, not both"),
        (["replay", "{good}", "--model", "no-such-model"], 3, "contextfold: unknown model 'no-such-model'"),
        (["replay", "--demo", "--policy", "{policy}"], 3, "contextfold: file {policy}: policy.trigger_pct:"),
        # The reply reserve is at most a fifth of the window by default: a policy may allow it the whole window.
        (["replay", "--demo", "--window", "1000", "--policy", "{reserve}"], 3,
         "contextfold: hard_cap_buffer: reserves 1000 tokens"),
        (["replay", "{good}", "--summarizer", "foo"], 3, "contextfold: --summarizer: 'foo': provider: expected"),
    ],
)
def test_bad_input_is_one_line_and_its_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, expected: str
) -> None:
    bad, policy, good = _bad_traj(tmp_path), tmp_path / "p.yaml", tmp_path / "good.jsonl"
    policy.write_text("policy:\n  trigger_pct: 1.5\n")
    reserve = tmp_path / "reserve.yaml"
    reserve.write_text("policy:\n  reply_reserve_max_pct: 1.0\n")
    good.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n')
    argv = [a.format(bad=bad, policy=policy, good=good, reserve=reserve) for a in argv]
    assert main(argv) == code
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(expected.format(bad=bad, policy=policy)), err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--demo", "--window", "0"]) == 2
    assert "--window: must be above 0" in capsys.readouterr().err
    assert main(["replay", "--demo", "--format", "xml"]) == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err
