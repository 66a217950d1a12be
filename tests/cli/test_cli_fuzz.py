"""The CLI over hundreds of malformed inputs: never a traceback, one line naming the file, a documented exit code.

The inputs are mutations of small valid sessions in every format the importers read (seeded, so a failure is
reproducible): cut short, bytes flipped, records of the wrong type, fields of the wrong type, deep nesting, huge
numbers, lone surrogates, bytes that are not UTF-8. ``main()`` runs in this process (fast); a few run as real
processes to show what a user sees.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from contextfold.cli import main

# The codes an input (as opposed to our own bug, 70) may produce; see the table in contextfold/cli/_common.py.
INPUT_CODES = {0, 1, 2, 3, 4}

_CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py\n"},
    {"role": "assistant", "content": "Two files."},
]
_ANTHROPIC = [
    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {"p": "."}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
]
_GEMINI = [
    {"role": "user", "parts": [{"text": "hi"}]},
    {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {"p": "."}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"output": "a.py"}}}]},
    {"role": "model", "parts": [{"text": "done"}]},
]
_RESPONSES = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    {"type": "function_call", "call_id": "f1", "name": "ls", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "f1", "output": "a.py"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
]
_TRAJ = {"history": _CHAT, "info": {"exit_status": "submitted"}}
_TAU = [{"task_id": 1, "trial": 0, "reward": 1.0, "info": {}, "traj": _CHAT}]

_ODD_VALUES: list[Any] = [None, 0, -1, 1.5, True, "", "x", [], {}, [None], {"role": None}, "\ud800", 10**5000]


def _deep(n: int) -> Any:
    value: Any = "leaf"
    for _ in range(n):
        value = [value]
    return value


def _mutate_value(rng: random.Random, value: Any) -> Any:
    """``value`` with one leaf or key somewhere replaced by something odd."""
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.15:
            del out[key]
        elif roll < 0.3:
            out[key + "_x"] = out.pop(key)
        else:
            out[key] = _mutate_value(rng, value[key]) if rng.random() < 0.6 else rng.choice(_ODD_VALUES)
        return out
    if isinstance(value, list) and value:
        out_list = list(value)
        i = rng.randrange(len(out_list))
        roll = rng.random()
        if roll < 0.15:
            del out_list[i]
        elif roll < 0.25:
            out_list.insert(i, rng.choice(_ODD_VALUES))
        elif roll < 0.35:
            out_list[i], out_list[-1] = out_list[-1], out_list[i]
        else:
            out_list[i] = _mutate_value(rng, out_list[i])
        return out_list
    return rng.choice([*_ODD_VALUES, _deep(rng.choice([200, 5000]))])


def _dump(value: Any) -> str:
    # default=str: a set or other odd value never stops the generator; ensure_ascii keeps lone surrogates writable.
    return json.dumps(value, default=str)


def _write_bytes_mutations(rng: random.Random, text: str) -> list[bytes]:
    raw = text.encode()
    cut = raw[: rng.randrange(1, len(raw))]
    flipped = bytearray(raw)
    for _ in range(3):
        flipped[rng.randrange(len(flipped))] = rng.randrange(256)
    return [cut, bytes(flipped), raw.replace(b"a", b"\xff", 1), b"", b"\n\n", b"[" * 100_000, b"9" * 10_000]


def malformed_inputs(seed: int = 12) -> list[tuple[str, bytes]]:
    """(file name, bytes): every importer's format, each broken in many ways."""
    rng = random.Random(seed)
    cases: list[tuple[str, bytes]] = []
    shapes: list[tuple[str, Callable[[Any], str], Any]] = [
        ("chat.jsonl", lambda v: "\n".join(_dump(m) for m in v) + "\n", _CHAT),
        ("anthropic.jsonl", lambda v: "\n".join(_dump(m) for m in v) + "\n", _ANTHROPIC),
        ("gemini.jsonl", lambda v: "\n".join(_dump(m) for m in v) + "\n", _GEMINI),
        ("responses.jsonl", lambda v: "\n".join(_dump(m) for m in v) + "\n", _RESPONSES),
        ("chat.json", _dump, _CHAT),
        ("run.traj", _dump, _TRAJ),
        ("tau.json", _dump, _TAU),
    ]
    for name, render, valid in shapes:
        for i in range(14):
            mutated = valid
            for _ in range(rng.randint(1, 3)):
                mutated = _mutate_value(rng, mutated)
            try:
                text = render(mutated)
            except (ValueError, RecursionError):  # the generator's own JSON limits: write the deep value by hand
                text = "[" * 5000 + "]" * 5000
            cases.append((f"{i}-{name}", text.encode("utf-8", "surrogatepass")))
        for j, raw in enumerate(_write_bytes_mutations(rng, render(valid))):
            cases.append((f"b{j}-{name}", raw))
    return cases


CASES = malformed_inputs()
# Commands every input goes through, and the heavier ones for a sample.
_LIGHT = [["count"], ["count", "--json"], ["convert", "--to", "anthropic"], ["convert", "--to", "gemini"]]
_HEAVY = [["compact", "-o", "-", "--store", "memory", "--archive", "{tmp}/archive"],
          ["replay", "--store", "memory", "--window", "4000", "--jobs", "1", "--progress"]]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    _, err = capsys.readouterr()
    return code, err


def _check(path: Path, argv: list[str], code: int, err: str) -> None:
    where = f"{' '.join(argv)} -> {code}: {err!r}"
    assert "Traceback" not in err, where
    assert code in INPUT_CODES, where  # never 70: an input is never a crash
    if code not in (0, 1):
        lines = err.splitlines()
        assert len(lines) >= 1, where
        failure = [line for line in lines if not line.startswith("contextfold: warning:")]
        assert len(failure) == 1 and failure[0].startswith("contextfold: "), where
        if code == 2:
            assert str(path) in failure[0], where  # the file is named


def test_the_fuzz_corpus_is_big_and_varied() -> None:
    assert len(CASES) >= 140
    assert len({raw for _, raw in CASES}) >= 100  # (the same empty or huge file under every suffix)


def test_light_commands_never_crash_on_malformed_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = codes = 0
    seen: set[int] = set()
    for name, raw in CASES:
        path = tmp_path / name
        path.write_bytes(raw)
        for command in _LIGHT:
            argv = [command[0], str(path), *command[1:]]
            code, err = _run(argv, capsys)
            _check(path, argv, code, err)
            runs += 1
            codes += code != 0
            seen.add(code)
    assert runs >= 500
    assert codes >= runs // 3 and 2 in seen  # most of the mutations are caught as bad input, not waved through


def test_compact_and_replay_never_crash_on_malformed_input(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(7)
    sample = rng.sample(CASES, 20)
    for name, raw in sample:
        path = tmp_path / name
        path.write_bytes(raw)
        for command in _HEAVY:
            argv = [command[0], str(path), *(a.format(tmp=tmp_path) for a in command[1:])]
            code, err = _run(argv, capsys)
            _check(path, argv, code, err)


@pytest.mark.parametrize("content", [
    b"[" * 100_000, b"{\"a\": " + b"9" * 10_000 + b"}", b"{\"per_session\": [1], \"sessions\": 1}",
    json.dumps({"sessions": 1, "per_session": [{"id": 5}]}).encode(), b"\xff\xfe", b"[]", b"null",
])
def test_report_never_crashes_on_malformed_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   content: bytes) -> None:
    path = tmp_path / "metrics.json"
    path.write_bytes(content)
    argv = ["report", str(path), "-o", str(tmp_path / "r.html")]
    code, err = _run(argv, capsys)
    _check(path, argv, code, err)
    assert code == 2


def _process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "contextfold", *args], capture_output=True, text=True, env=env,
                          check=False, timeout=120, cwd=cwd)


def test_what_a_user_sees_in_a_real_process(tmp_path: Path) -> None:
    """The red team's cases, as processes: one line each, the documented code, nothing created by a lookup."""
    deep, digits, surrogate = tmp_path / "deep.json", tmp_path / "n.jsonl", tmp_path / "s.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    digits.write_text('{"role": "user", "content": "hi"}\n' + "9" * 10_000 + "\n")
    surrogate.write_text('{"role": "user", "content": "a\\ud800b"}\n{"role": "assistant", "content": "ok"}\n')
    done = _process("count", str(deep), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"contextfold: {deep}: invalid JSON: arrays or objects nested too deeply to read\n"
    done = _process("report", str(deep), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and str(deep) in done.stderr
    done = _process("convert", str(digits), "--to", "anthropic", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"contextfold: {digits}: record 1 (line 2): invalid JSON: a number with 10000 digits " \
                          f"(at most {sys.get_int_max_str_digits()})\n"
    # A lone surrogate is data, kept losslessly: converted, it is written as its JSON escape.
    done = _process("convert", str(surrogate), "--to", "openai_chat", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0]) == {"role": "user", "content": "a\ud800b"}
    # No store here: say so, and do not create one.
    for argv in (["cache", "read", "tout_0123456789abcdef"], ["cache", "grep", "x"]):
        done = _process(*argv, cwd=tmp_path)
        assert done.returncode == 4
        assert done.stderr.startswith("contextfold: --store: no tool output store at '.contextfold/")
    assert not (tmp_path / ".contextfold").exists()
