"""A literal grep over a long session's cut outputs is stopped as a pattern that "backtracks too much".

The grep's time limit was a deadline on the process's CPU time, so everything between the pattern's searches counted
against the pattern: reading and decoding the lines, cutting long ones around the session's secrets, the store's own
work, and any other thread's (the background read-ahead, the proxy's other sessions). A user would see, for the
literal pattern ``zzz_absent`` over 100 cut outputs of 150 KB (15 MB, ordinary 100-character lines):
``error: the pattern 'zzz_absent' took more than 1 s and was stopped: it backtracks too much (nested quantifiers
...)``; history_search, which reads every cut output back in full, the same. The limit now counts the pattern's own
work only; a catastrophic pattern is still stopped.
"""

from __future__ import annotations

import json
import time

import pytest

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive.search import HistorySearchTool
from contextfold.cache import ToolOutputCache
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore

LIMIT_S = 0.05
# What a store's read costs here (a Redis client decoding a reply, SQLite missing its page cache), in CPU seconds.
READ_COST_S = 0.01


def burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class CostlyReads(MemoryBlobStore):
    """A store whose every read costs CPU that is not the pattern's."""

    def read_range(self, key: str, start: int, length: int) -> bytes:
        burn(READ_COST_S)
        return super().read_range(key, start, length)


@pytest.fixture(autouse=True)
def short_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("contextfold.untrusted.regex.PATTERN_TIME_LIMIT_S", LIMIT_S)


def test_a_literal_grep_is_not_stopped_for_work_that_is_not_the_pattern_s() -> None:
    cache = ToolOutputCache(CostlyReads())
    for k in range(12):  # 12 outputs of one chunk each: 0.12 s of reads against a 0.05 s limit
        cache.put("\n".join(f"rt10b-grep {k} line {i}" for i in range(100)))
    answer = cache.execute_tool_call(ToolCall("g", "tool_output_cache_grep", json.dumps({"pattern": "zzz_absent"})))
    assert answer.text == "no match for /zzz_absent/ in 12 cached output(s)", answer.text[:200]


def test_history_search_resolving_cut_outputs_is_not_stopped_either() -> None:
    archive = Archive(MemoryArchiveStore())

    def costly_resolve(ref: str) -> str:
        burn(READ_COST_S)
        return f"rt10b-grep full output of {ref}"

    cut = [Message.tool(f"c{k}", f"[cut] ref=tout_{k:016x}", name="ls").with_meta(
        ref=f"tout_{k:016x}", kind="truncated", id=f"m{k}") for k in range(12)]
    archive.archive_transcript("rt10b-grep", [Message.user("go").with_meta(id="u"), *cut])
    tool = HistorySearchTool(archive, "rt10b-grep", resolve_ref=costly_resolve)
    answer = tool.execute_tool_call(ToolCall("h", "history_search", json.dumps({"pattern": "zzz_absent"})))
    assert answer.text.startswith("history_search: 0 matching lines"), answer.text[:200]


def test_a_catastrophic_pattern_is_still_stopped() -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    cache.put("\n".join(["a" * 40 + "!"] * 50))
    answer = cache.execute_tool_call(ToolCall("g", "tool_output_cache_grep", json.dumps({"pattern": "(a|aa)+$"})))
    assert answer.text.startswith("error: the pattern '(a|aa)+$' took more than 0.05 s"), answer.text[:200]
