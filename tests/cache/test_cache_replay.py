"""Acceptance: every shared SWE-agent session replayed through caching + masking with a 32,000-token window.

Tool-output tokens in the view never exceed the budget; every original tool output is retrievable byte for byte by
its ref; reads by offset/limit and grep on the real outputs return the expected lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import TRAJECTORIES, all_session_files, require

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.importers._files import load_session, load_sessions
from contextfold.importers._session import RecordedSession
from contextfold.messages import Message
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore
from contextfold.tokens import MessageCounter, TiktokenCounter

WINDOW = 32_000
TEXT_COUNTER = TiktokenCounter("o200k_base")
COUNTER = MessageCounter(TEXT_COUNTER)
SWE_FILES = [p for p in all_session_files() if p.suffix == ".traj"]


def replay(session: RecordedSession, cache: ToolOutputCache) -> tuple[list[Message], list[int]]:
    """Add the session one message at a time, caching each and masking after each; return the view."""
    budget = cache.config.budget_tokens(WINDOW)
    view: list[Message] = []
    peaks: list[int] = []
    for m in session.messages:
        view.append(cache.process(m))
        result = mask_tool_outputs(view, budget_tokens=budget, counter=COUNTER, cache=cache)
        view = result.messages
        assert result.tool_output_tokens <= budget, f"{session.id}: {result.tool_output_tokens} > {budget}"
        peaks.append(result.tool_output_tokens)
    return view, peaks


def expected_line(line: str, limit: int) -> str:
    line = line.removesuffix("\r")
    return line if len(line) <= limit else line[:limit]


def check_retrieval(cache: ToolOutputCache, ref_id: str, original: str, where: str) -> None:
    assert cache.get(ref_id) == original, f"{where}: cached output differs from the original"
    lines = original.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    ref = cache.ref(ref_id)
    assert ref.line_count == len(lines)
    # A slice from the middle, by offset and limit.
    offset = max(1, len(lines) // 2)
    got = cache.read(ref_id, offset, 25)
    want = lines[offset - 1 : offset - 1 + 25]
    assert len(got.lines) == len(want), where
    for have, line in zip(got.lines, want, strict=True):
        assert have.startswith(expected_line(line, cache.config.max_line_length)), where
    # A distinctive line (from the middle on, if there is one there) is found by grep, at its line number.
    counts: dict[str, int] = {}
    for line in lines:
        counts[line.removesuffix("\r")] = counts.get(line.removesuffix("\r"), 0) + 1
    for k in [*range(offset - 1, len(lines)), *range(offset - 1)]:
        line = lines[k].removesuffix("\r")
        if counts[line] == 1 and 8 <= len(line) <= 300 and line.strip():
            result = cache.grep("^" + re.escape(line) + "$", ref_id)
            assert [m.line_number for m in result.matches] == [k + 1], where
            return
    pytest.fail(f"{where}: no distinctive line to grep for") if len(lines) > 100 else None


@pytest.mark.parametrize("path", SWE_FILES, ids=[p.stem for p in SWE_FILES])
def test_swe_agent_session_replays_within_budget_and_loses_nothing(path: Path, tmp_path: Path) -> None:
    require(path.is_file(), f"missing {path}")
    session = load_session(path)
    with LocalBlobStore(tmp_path) as store:
        cache = ToolOutputCache(store, counter=TEXT_COUNTER, context_window=WINDOW)
        view, _ = replay(session, cache)
        assert len(view) == len(session.messages)
        cached = 0
        for i, (original, now) in enumerate(zip(session.messages, view, strict=True)):
            if original.role != "tool":
                assert now is original
                continue
            ref_id = now.meta.get("ref")
            if ref_id is None:
                assert now == original
                continue
            cached += 1
            check_retrieval(cache, ref_id, original.text, f"{session.id} message {i}")
        tool_tokens = sum(COUNTER.count_message(m) for m in session.messages if m.role == "tool")
        if tool_tokens > cache.config.budget_tokens(WINDOW):
            assert cached > 0, f"{session.id}: over budget, yet nothing was cached or masked"


def test_all_shared_swe_agent_sessions_are_covered() -> None:
    require(TRAJECTORIES.is_dir(), f"shared data not found at {TRAJECTORIES}")
    assert len(SWE_FILES) == 72


def test_tau_bench_sessions_replay_within_budget() -> None:
    path = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"
    require(path.is_file(), f"missing {path}")
    cache = ToolOutputCache(MemoryBlobStore(), counter=TEXT_COUNTER, context_window=WINDOW)
    for session in load_sessions(path):
        view, _ = replay(session, cache)
        for original, now in zip(session.messages, view, strict=True):
            ref_id = now.meta.get("ref")
            if ref_id is not None:
                assert cache.get(ref_id) == original.text
            else:
                assert now is original
