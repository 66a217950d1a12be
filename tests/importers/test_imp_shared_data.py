"""Every recorded session under ../shared/data/trajectories imports, with every tool call paired to its result."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import TRAJECTORIES, all_session_files, require

from contextfold.importers._files import detect_source, load_session, load_sessions
from contextfold.importers._session import RecordedSession
from contextfold.messages import Message

LM32B = TRAJECTORIES / "sweagent-lm32b"
CLAUDE = TRAJECTORIES / "sweagent-claude4sonnet"
TAU = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"


@pytest.fixture(scope="module")
def sessions() -> list[RecordedSession]:
    require(TRAJECTORIES.is_dir(), f"shared data not found at {TRAJECTORIES}")
    return load_sessions(TRAJECTORIES)


def _assert_paired(messages: list[Message], where: str) -> None:
    """Each assistant call is answered, in order, by the tool messages right after it; no result is an orphan."""
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m.role != "tool", f"{where}: orphan tool result at {i}"
        if m.tool_calls:
            answers = messages[i + 1 : i + 1 + len(m.tool_calls)]
            assert [a.role for a in answers] == ["tool"] * len(m.tool_calls), f"{where}: message {i}"
            assert [a.tool_call_id for a in answers] == [c.id for c in m.tool_calls], f"{where}: message {i}"
            i += len(m.tool_calls)
        i += 1


def test_every_file_imports_with_the_expected_counts(sessions: list[RecordedSession]) -> None:
    by_source = Counter(s.source for s in sessions)
    assert by_source == {"swe_agent": 69 + 3, "tau_bench": 200}
    assert len({s.id for s in sessions}) == len(sessions)
    assert all(s.format == "openai_chat" for s in sessions)
    assert len(all_session_files()) == 69 + 3 + 1


def test_every_session_keeps_every_message_and_pairs_every_call(sessions: list[RecordedSession]) -> None:
    for s in sessions:
        _assert_paired(s.messages, s.id)
        assert s.messages[0].role == "system", s.id


@pytest.mark.parametrize("path", sorted(LM32B.glob("*.traj")), ids=lambda p: p.stem)
def test_lm32b_text_calls_become_tool_calls(path: Path) -> None:
    raw = json.loads(path.read_text())["history"]
    session = load_session(path)
    # One message per history entry: observations turn into tool results, nothing is merged or dropped.
    assert len(session.messages) == len(raw)
    for i, (entry, m) in enumerate(zip(raw, session.messages, strict=True)):
        if entry["role"] == "assistant" and "</function>" in entry["content"]:
            assert m.role == "assistant" and len(m.tool_calls) == 1, i
            call = m.tool_calls[0]
            assert call.id == f"call_{i}"
            assert entry["content"].startswith(m.text), "text before the block is kept"
            assert f"<function={call.name}>" in entry["content"]
            assert m.meta["raw_content"] == entry["content"]
            assert m.meta["source_extra"]["action"] == entry["action"]
            answer = session.messages[i + 1]
            assert answer.role == "tool" and answer.tool_call_id == call.id
            assert answer.content == raw[i + 1]["content"], "the observation is kept verbatim"
            assert answer.meta["raw_role"] == "user"
            for name, value in json.loads(call.arguments).items():
                assert f"<parameter={name}>{value}</parameter>" in entry["content"]
        elif entry["role"] == "assistant":
            assert not m.tool_calls and m.content == entry["content"]


def test_lm32b_totals() -> None:
    require(LM32B.is_dir(), "shared SWE-agent data missing")
    sessions = load_sessions(LM32B)
    calls = Counter(c.name for s in sessions for m in s.messages for c in m.tool_calls)
    results = sum(m.role == "tool" for s in sessions for m in s.messages)
    # 1,625 assistant turns; one (sphinx-doc__sphinx-7757, "Exit due to context window") has no call.
    assert sum(calls.values()) == results == 1624
    assert calls == {"str_replace_editor": 970, "bash": 586, "submit": 68}
    stray = [
        (s.id, i) for s in sessions for i, m in enumerate(s.messages) if m.role == "assistant" and not m.tool_calls
    ]
    assert stray == [("sphinx-doc__sphinx-7757", 50)]
    after = sessions[[s.id for s in sessions].index("sphinx-doc__sphinx-7757")].messages[51]
    assert after.role == "user" and after.text.startswith("OBSERVATION:")


def test_claude_native_calls_and_list_ids() -> None:
    require(CLAUDE.is_dir(), "shared SWE-agent data missing")
    sessions = load_sessions(CLAUDE)
    assert [s.id for s in sessions] == [p.stem for p in sorted(CLAUDE.glob("*.traj"))]
    calls = [c for s in sessions for m in s.messages for c in m.tool_calls]
    assert len(calls) == 90 and all(c.id.startswith("toolu_") for c in calls)
    assert all(isinstance(json.loads(c.arguments), dict) for c in calls)
    cached = [m for s in sessions for m in s.messages if any(p.cache_control for p in m.parts)]
    assert len(cached) == 6 and all(m.role == "tool" for m in cached)
    assert sessions[0].metadata["swe_agent_version"] == "1.1.0"
    assert sessions[0].metadata["environment"] == sessions[0].id


def test_tau_bench_entries_become_sessions_with_their_ground_truth() -> None:
    require(TAU.is_file(), "shared tau-bench data missing")
    raw = json.loads(TAU.read_text())
    sessions = load_sessions(TAU)
    assert detect_source(TAU) == "tau_bench"
    assert len(sessions) == 200
    for entry, s in zip(raw, sessions, strict=True):
        assert s.id == f"gpt-4o-airline/{entry['task_id']}-{entry['trial']}"
        assert len(s.messages) == len(entry["traj"])
        assert s.metadata["instruction"] == entry["info"]["task"]["instruction"]
        assert s.metadata["actions"] == entry["info"]["task"]["actions"]
        assert s.metadata["reward"] == entry["reward"]
    calls = sum(len(m.tool_calls) for s in sessions for m in s.messages)
    results = [m for s in sessions for m in s.messages if m.role == "tool"]
    assert calls == len(results) == 1164
    assert all(m.name for m in results), "tau-bench names its tool results"


def test_tau_bench_encodes_back_to_the_recorded_messages() -> None:
    """The import is lossless: the OpenAI Chat encoding of each session is the recorded ``traj``, byte for byte."""
    require(TAU.is_file(), "shared tau-bench data missing")
    from contextfold.formats import openai_chat

    raw = json.loads(TAU.read_text())
    for entry, session in zip(raw, load_sessions(TAU), strict=True):
        assert openai_chat.encode(session.messages) == entry["traj"], session.id


def test_swe_agent_native_messages_encode_back_without_recorder_keys() -> None:
    require(CLAUDE.is_dir(), "shared SWE-agent data missing")
    from contextfold.formats import openai_chat

    recorder = {"agent", "message_type", "thought", "action"}
    for path in sorted(CLAUDE.glob("*.traj")):
        raw = json.loads(path.read_text())["history"]
        encoded = openai_chat.encode(load_session(path).messages)
        for entry, item in zip(raw, encoded, strict=True):
            expected = {k: v for k, v in entry.items() if k not in recorder}
            if entry["role"] == "tool":
                (expected["tool_call_id"],) = expected.pop("tool_call_ids")
                if "cache_control" in expected:
                    cache_control = expected.pop("cache_control")
                    expected["content"] = [{**expected["content"][-1], "cache_control": cache_control}]
            assert item == expected
