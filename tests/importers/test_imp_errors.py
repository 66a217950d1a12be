"""Malformed recordings give one clear error naming the file, the record, the field and the problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.errors import InvalidHistory
from contextfold.importers._files import detect_source, load_session, load_sessions
from contextfold.importers._session import SessionFileError
from contextfold.importers.swe_agent import parse_swe_agent
from contextfold.importers.tau_bench import parse_tau_bench

SYSTEM = {"role": "system", "content": "sys"}
CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}


def _traj(tmp_path: Path, *history: Any, name: str = "bad.traj") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"history": [SYSTEM, *history], "info": {}}))
    return path


def _tau(tmp_path: Path, *trajs: list[Any]) -> Path:
    path = tmp_path / "tau.json"
    entries = [{"task_id": i, "trial": 0, "reward": 1.0, "info": {}, "traj": t} for i, t in enumerate(trajs)]
    path.write_text(json.dumps(entries))
    return path


def _error(path: Path) -> SessionFileError:
    with pytest.raises(SessionFileError) as info:
        load_sessions(path)
    return info.value


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        (
            [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}],
            "record 2: role: unknown role 'robot'",
        ),
        ([{"content": "x"}], "record 1: role: unknown role null"),
        (
            [{"role": "assistant", "content": "", "tool_calls": [CALL]}, {"role": "tool", "content": "out"}],
            "record 2: tool_call_ids: tool result without tool_call_ids",
        ),
        (
            [
                {"role": "assistant", "content": "", "tool_calls": [CALL]},
                {"role": "tool", "content": "o", "tool_call_ids": []},
            ],
            "record 2: tool_call_ids: is empty",
        ),
        (
            [{"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "bash", "arguments": "{ls"}}]}],
            "record 1: tool_calls[0].function.arguments: arguments are not valid JSON",
        ),
        (
            [{"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "bash", "arguments": {"a": 1}}}]}],
            "record 1: tool_calls[0].function.arguments: expected a string, got object",
        ),
        ([{"role": "assistant", "tool_calls": [{**CALL, "id": ""}]}], "record 1: tool_calls[0].id: must not be empty"),
        ([{"role": "user", "content": 42}], "record 1: content: expected an array, got number"),
        ([{"role": "user", "content": [{"type": "text", "text": 1}]}], "record 1: content[0].text: expected a string"),
        ([{"role": "user", "content": ["x"]}], "record 1: content[0]: expected an object, got string"),
        (["not a message"], "record 1: expected an object, got string"),
    ],
)
def test_swe_agent_problems_name_file_record_and_field(tmp_path: Path, history: list[Any], expected: str) -> None:
    path = _traj(tmp_path, *history)
    error = _error(path)
    assert str(error).startswith(f"{path}: {expected}")
    assert "\n" not in str(error)
    assert isinstance(error, InvalidHistory) and error.path == str(path)


def test_pure_parser_raises_invalid_history_with_index_and_field() -> None:
    with pytest.raises(InvalidHistory) as info:
        parse_swe_agent({"history": [SYSTEM, {"role": "robot"}]}, session_id="s")
    assert (info.value.index, info.value.field) == (1, "role")
    assert not isinstance(info.value, SessionFileError)


def test_tau_bench_problems_name_the_entry_and_the_message(tmp_path: Path) -> None:
    ok = [SYSTEM, {"role": "user", "content": "hi"}]
    error = _error(_tau(tmp_path, ok, [*ok, {"role": "tool", "content": "out"}]))
    assert str(error) == f"{tmp_path / 'tau.json'}: record 1: traj[2].tool_call_id: expected a string, got null"
    assert (error.record, error.field) == (1, "traj[2].tool_call_id")
    error = _error(_tau(tmp_path, [*ok, {"role": "assistant", "tool_calls": [{**CALL, "function": {"name": ""}}]}]))
    assert "record 0: traj[2].tool_calls[0].function.name: must not be empty" in str(error)
    with pytest.raises(InvalidHistory, match=r"message 0: traj: expected a list of messages, got string"):
        parse_tau_bench([{"traj": "x"}], stem="t")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"history": [', "invalid JSON: Expecting value (line 1 column 14)"),
        ('{"steps": []}', "unrecognised session format (an object with keys ['steps'])"),
        ("42", "unrecognised session format (int)"),
        ("", "invalid JSON: Expecting value (line 1 column 1)"),
    ],
)
def test_unreadable_files(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    assert str(_error(path)).startswith(f"{path}: {expected}")


def test_not_utf8_missing_file_and_folder(tmp_path: Path) -> None:
    path = tmp_path / "s.traj"
    path.write_bytes(b'{"history": ["\xff"]}')
    assert str(_error(path)) == f"{path}: not UTF-8 text (byte 14)"
    assert str(_error(tmp_path / "absent.traj")) == f"{tmp_path / 'absent.traj'}: no such file or folder"
    # In a folder, the error names the file inside it; files that are not sessions are skipped.
    path.unlink()
    (tmp_path / "notes.txt").write_text("not a session")
    _traj(tmp_path, {"role": "user", "content": "fine"}, name="a.traj")
    bad = _traj(tmp_path, {"role": "robot"}, name="b.traj")
    assert str(_error(tmp_path)).startswith(f"{bad}: record 1: role")


def test_load_session_wants_exactly_one(tmp_path: Path) -> None:
    ok = [SYSTEM, {"role": "user", "content": "hi"}]
    path = _tau(tmp_path, ok, ok)
    with pytest.raises(SessionFileError, match=r"expected exactly one session, found 2 \(tau/0-0, tau/1-0\)"):
        load_session(path)
    assert detect_source(path) == "tau_bench"
    assert detect_source(json.loads(path.read_text())) == "tau_bench"
    assert detect_source({"history": []}) == "swe_agent"
    with pytest.raises(InvalidHistory, match="unrecognised session format"):
        detect_source({"steps": []})


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.sampled_from(["user", "tool", "assistant"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["role", "content", "tool_calls", "tool_call_ids", "tool_call_id", "id", "function", "type"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(_json, max_size=5), traj=st.lists(_json, max_size=5))
def test_any_json_either_imports_or_raises_invalid_history(history: list[Any], traj: list[Any]) -> None:
    """Whatever a recording holds, the importers never fail with anything but InvalidHistory."""
    for parse in (
        lambda: parse_swe_agent({"history": history}, session_id="s"),
        lambda: parse_tau_bench([{"traj": traj}], stem="t"),
    ):
        try:
            parse()
        except InvalidHistory as exc:
            assert exc.index is not None and exc.problem
