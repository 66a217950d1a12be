"""The search tools read the CPU clock per run of lines, not per line, and their time limit still holds.

Reading this thread's CPU clock is a system call: the untrusted pattern's limit read it twice a line, about 180 ms of
a grep or history_search over 100,000 lines. It is now read around runs of lines (``search_each``); inside a run each
search's timeout is what is left less the run's wall-clock time, so a catastrophic line and a run of slow ones are
still stopped at the limit.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive.search import HistorySearchTool
from contextfold.cache import ToolOutputCache
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore
from contextfold.untrusted import PatternTimeout, UntrustedPattern

LINES = 10_000
# Well below one read a line (the base read 2 a line: 20,000), well above the ~2 a run of 256 lines.
MAX_CLOCK_READS = LINES // 50
TEXT = "\n".join(f"nonce-f11-clock line {i} of a long build log" for i in range(LINES))


@pytest.fixture
def clock_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads = [0]
    thread_time = time.thread_time

    def counted() -> float:
        reads[0] += 1
        return thread_time()

    monkeypatch.setattr(time, "thread_time", counted)
    return reads


@pytest.mark.parametrize("pattern", ["zzz_absent", "zzz_abs(e)nt"])  # a literal, and one for the engine
def test_a_grep_over_10_000_lines_reads_the_clock_per_run_not_per_line(clock_reads: list[int], pattern: str) -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    cache.put(TEXT)
    clock_reads[0] = 0
    answer = cache.execute_tool_call(ToolCall("g", "tool_output_cache_grep", json.dumps({"pattern": pattern})))
    assert answer.text == f"no match for /{pattern}/ in 1 cached output(s)", answer.text[:200]
    assert 0 < clock_reads[0] <= MAX_CLOCK_READS


def test_history_search_over_10_000_lines_reads_the_clock_per_run_not_per_line(clock_reads: list[int]) -> None:
    archive = Archive(MemoryArchiveStore())
    cut = Message.tool("c0", "[cut] ref=tout_00000000000f11c0", name="cat").with_meta(
        ref="tout_00000000000f11c0", kind="truncated", id="m0")
    archive.archive_transcript("f11-clock", [Message.user("go").with_meta(id="u"), cut])
    tool = HistorySearchTool(archive, "f11-clock", resolve_ref=lambda ref: TEXT)
    clock_reads[0] = 0
    answer = tool.execute_tool_call(ToolCall("h", "history_search", json.dumps({"pattern": "zzz_absent"})))
    assert answer.text.startswith("history_search: 0 matching lines"), answer.text[:200]
    assert 0 < clock_reads[0] <= MAX_CLOCK_READS


def test_grep_finds_the_same_lines_and_stops_at_its_cap_across_runs() -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    ref = cache.put(TEXT)
    call = ToolCall("g", "tool_output_cache_grep",
                    json.dumps({"pattern": r"line \d*7 of", "ref_id": ref.id, "max_matches": 300}))
    lines = cache.execute_tool_call(call).text.splitlines()
    numbers = [int(line.split(":")[1]) for line in lines if line.startswith(ref.id)]
    assert numbers == [i + 1 for i in range(LINES) if i % 10 == 7][:300]  # (lines counted from 1)


class CountedSearches:
    """The compiled pattern, counting its searches."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self.calls = 0

    def search(self, text: str, **kwargs: Any) -> Any:
        self.calls += 1
        return self.compiled.search(text, **kwargs)


def test_a_run_of_lines_each_under_the_limit_is_stopped_at_the_limit_not_at_the_run_s_end() -> None:
    slow = "a" * 18 + "!"  # (a|aa)+$ backtracks: a few ms a line
    probe = UntrustedPattern("(a|aa)+$")
    costs = []
    for _ in range(3):
        began = time.thread_time()
        probe.search(slow)
        costs.append(time.thread_time() - began)
    pattern = UntrustedPattern("(a|aa)+$", time_limit_s=2.5 * statistics.median(costs))
    counted = CountedSearches(pattern._compiled)
    pattern._compiled = counted
    pattern.start()
    with pytest.raises(PatternTimeout):
        pattern.search_each([slow] * 256)
    assert counted.calls <= 16  # (a timeout per line alone would let all 256 run: 100 times the limit)


def test_a_catastrophic_line_inside_a_run_is_stopped() -> None:
    pattern = UntrustedPattern("(a|aa)+$", time_limit_s=0.05)
    pattern.start()
    with pytest.raises(PatternTimeout):
        pattern.search_each(["nonce-f11 ok"] * 100 + ["a" * 40 + "!"] + ["nonce-f11 ok"] * 100)


# Letters whose case folding is not ASCII's (the Kelvin sign folds to k, the long s to s, the dotted capital I to i),
# a few pattern characters that are literal, and ASCII letters of both cases.
_ALPHABET = "aAkKsSiI \u212a\u017f\u0130\u00df-_:#/\t"


@settings(max_examples=300, deadline=None)
@given(st.text(_ALPHABET, min_size=1, max_size=4), st.lists(st.text(_ALPHABET, max_size=12), max_size=6),
       st.booleans())
def test_a_literal_pattern_matches_the_lines_the_engine_matches(pattern: str, lines: list[str],
                                                                 ignore_case: bool) -> None:
    engine = regex.compile(pattern, regex.VERSION0 | (regex.IGNORECASE if ignore_case else 0))
    untrusted = UntrustedPattern(pattern, ignore_case=ignore_case)
    untrusted.start()
    assert untrusted.search_each(lines) == [engine.search(line) is not None for line in lines]
