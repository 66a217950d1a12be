"""``contextfold compact`` and what it leaves behind: the compacted JSONL, the cache (``cache read``/``grep``),
the archive (``archive restore``, ``status``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import TRAJECTORIES, require

from contextfold.cli import main
from contextfold.formats import get_format
from contextfold.importers._files import load_session
from contextfold.replay import demo_session_path
from contextfold.tokens import counter_for_model

SESSION = "django__django-13590"


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compact")
    paths = {"out": root / "out.jsonl", "store": root / "store", "archive": root / "archive"}
    code = main(["compact", demo_session_path(), "-o", str(paths["out"]), "--to", "anthropic", "--window", "16000",
                 "--store", f"local://{paths['store']}", "--archive", str(paths["archive"])])
    assert code == 0
    return paths


def test_compacted_output_is_smaller_and_valid(compacted: dict[str, Path]) -> None:
    items = [json.loads(line) for line in compacted["out"].read_text(encoding="utf-8").splitlines()]
    wire = get_format("anthropic")
    wire.validate(items)
    messages = wire.decode(items)
    original = load_session(demo_session_path()).messages
    counter = counter_for_model("gpt-4o")
    assert counter.count_messages(messages) < 16_000 < counter.count_messages(original)
    assert messages[0].role == "system" and messages[0].text == original[0].text  # pinned, byte for byte
    assert any("summary" in m.text.lower() for m in messages)


def test_compact_reports_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.jsonl"
    assert main(["compact", demo_session_path(), "-o", str(out), "--store", "memory", "--archive",
                 str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert re.fullmatch(rf"contextfold: {SESSION}: compacted \d+ messages: [\d,]+ → [\d,]+ tokens .*\n", err)


def test_cut_outputs_read_back_from_the_cache(compacted: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    store = f"local://{compacted['store']}"
    # The demo's biggest tool output (a listing of ~17K tokens of file names) was cut at write time, kept whole.
    assert main(["cache", "grep", r"formats\.py$", "--max-matches", "2", "--store", store]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 match(es) for /formats\\.py$/ in ")
    ref = re.findall(r"^(tout_[0-9a-f]{16}):\d+:", out, flags=re.MULTILINE)[0]
    assert main(["cache", "read", ref, "--offset", "2", "--limit", "3", "--store", store]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"[{ref}: lines 2-4 of ") and len(out.splitlines()) >= 4
    assert main(["cache", "grep", "formats", "--ref", ref, "--max-matches", "1", "--store", store]) == 0
    assert capsys.readouterr().out.startswith("1 match(es) for /formats/ in 1 cached output(s)")


def test_restore_gives_back_the_original(compacted: dict[str, Path], tmp_path: Path) -> None:
    restored = tmp_path / "restored.jsonl"
    assert main(["archive", "restore", SESSION, "--archive", str(compacted["archive"]), "--store",
                 f"local://{compacted['store']}", "-o", str(restored)]) == 0
    original = get_format("openai_chat").encode(load_session(demo_session_path()).messages)
    got = [json.loads(line) for line in restored.read_text(encoding="utf-8").splitlines()]
    assert got == original


def test_status_lists_the_archived_session(compacted: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--archive", str(compacted["archive"]), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["sessions"]
    assert rows == [{"session": SESSION, "compactions": 1, "summaries": 1, "events": rows[0]["events"],
                     "voided_events": 0, "latest_transcript_messages": len(load_session(demo_session_path()).messages)}]
    assert main(["status", "--archive", str(compacted["archive"])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["session", "compactions", "summaries", "events", "messages"]
    assert lines[1].split()[:3] == [SESSION, "1", "1"]


def test_a_multi_session_file_needs_a_session_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tau = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"
    require(tau.is_file(), f"shared data not found: {tau}")
    out = tmp_path / "o.jsonl"
    assert main(["compact", str(tau), "-o", str(out), "--store", "memory", "--archive", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"contextfold: {tau}: holds 200 sessions: pick one with --session ID\n"
    assert main(["compact", str(tau), "--session", "gpt-4o-airline/3-0", "-o", str(out), "--window", "4000",
                 "--store", "memory", "--archive", str(tmp_path / "a")]) == 0
    assert out.is_file() and (tmp_path / "a" / "_gpt-4o-airline_2f3-0").is_dir()  # (the archive's encoding of the id)


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": 5}\n')
    assert main(["compact", str(bad), "-o", str(tmp_path / "o.jsonl"), "--store", "memory"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"contextfold: {bad}: record 1 (line 2): content") and err.count("\n") == 1
    assert main(["compact", str(bad)]) == 2
    assert "the following arguments are required: -o/--out" in capsys.readouterr().err


def test_the_compacted_history_written_holds_no_secret_the_session_saw(tmp_path: Path) -> None:
    # The password is recognised only in its context (early, summarized away); a recent turn repeats it bare and
    # stays verbatim in the view. The file is redacted like the archive unless --no-redact asks for the model's view.
    secret = "Qz7-vault-Tr0ub4dor-93k"
    history: list[dict[str, str]] = [{"role": "system", "content": "You fix deployments."},
                                     {"role": "user", "content": f"The staging DB password: {secret}"}]
    for turn in range(30):
        history += [{"role": "assistant", "content": f"step {turn}: " + "checking the migration logs " * 40},
                    {"role": "user", "content": f"ok {turn}, go on"}]
    history += [{"role": "assistant", "content": f"Connecting with {secret} now."}]
    source = tmp_path / "deploy.traj"
    source.write_text(json.dumps({"history": history}), encoding="utf-8")
    written = {}
    for flag in ([], ["--no-redact"]):
        out = tmp_path / f"out{len(flag)}.jsonl"
        assert main(["compact", str(source), "-o", str(out), "--window", "4000", "--store", "memory",
                     "--archive", str(tmp_path / f"archive{len(flag)}"), *flag]) == 0
        written[bool(flag)] = out.read_text(encoding="utf-8")
    assert "Connecting with" in written[False] and secret not in written[False]
    assert f"Connecting with {secret} now." in written[True]
