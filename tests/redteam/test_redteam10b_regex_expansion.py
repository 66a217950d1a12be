"""A grep or history_search pattern whose counted repeats nest: compiled before the time limit starts.

The model chooses the pattern of ``tool_output_cache_grep`` and ``history_search`` (a prompt-injected tool output can
choose it for it). The time limit bounds the search, but the ``regex`` engine expands counted repeats when it
compiles: ``(?:x{1000}){1000}`` (17 characters) took 0.47 s and 274 MB to compile, and
``(?:(?:(?:x{60}){60}){60}){60}`` (30 characters) ran 3.5 s CPU and past 3 GB before a ``MemoryError``: with no
memory limit the agent process (or the proxy serving every session) is the one that runs out. The pattern is refused
instead, with a result that says why; ordinary counted patterns still work.
"""

from __future__ import annotations

import json

import pytest

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive.search import HistorySearchTool
from contextfold.cache import ToolOutputCache
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore
from contextfold.untrusted import InvalidPattern, TimedPattern, UntrustedPattern

# 160,000 expanded copies: over the bound, yet cheap enough on an unfixed tree (~0.1 s, ~60 MB) to fail safely.
NESTED = "(?:x{400}){400}"


def grep_answer(pattern: str) -> str:
    cache = ToolOutputCache(MemoryBlobStore())
    text = "\n".join(f"rt10b-regex line {i} 10.0.0.{i}" for i in range(3000))
    cache.process(Message.tool("c0", text, name="ls"))
    call = ToolCall("c1", "tool_output_cache_grep", json.dumps({"pattern": pattern}))
    return cache.execute_tool_call(call).text


def test_a_nested_counted_repeat_is_refused_by_grep() -> None:
    answer = grep_answer(NESTED)
    assert answer.startswith("error:") and "repeat" in answer, answer


def test_a_nested_counted_repeat_is_refused_by_history_search() -> None:
    tool = HistorySearchTool(Archive(MemoryArchiveStore()), "rt10b-regex")
    answer = tool.execute_tool_call(ToolCall("c2", "history_search", json.dumps({"pattern": NESTED}))).text
    assert answer.startswith("error:") and "repeat" in answer, answer


@pytest.mark.parametrize("pattern", [NESTED, "(?:[ab]{500,}){500}", "((?:\\d{50}){50}){50}"])
def test_both_pattern_kinds_refuse_an_expansion_before_compiling(pattern: str) -> None:
    with pytest.raises(InvalidPattern, match="repeat"):
        UntrustedPattern(pattern)
    with pytest.raises(InvalidPattern, match="repeat"):
        TimedPattern(pattern)


@pytest.mark.parametrize("pattern", [r"\d{1,3}(\.\d{1,3}){3}", "x{1000}", ".{0,100000}", "(?:a{0,1000}){0,1000}",
                                     "(?:ab){300}", "(a|b{20}){50}", r"[0-9a-f]{64}", "line (\\d+)"])
def test_ordinary_counted_patterns_still_search(pattern: str) -> None:
    assert not grep_answer(pattern).startswith("error:")
