"""Input the model chooses is untrusted: catastrophic regexes, deep or huge JSON, anything that raises.

Every such call must come back from ``execute_tool_call`` as a tool result saying what is wrong, within a bounded
time, never as an exception that would break the agent loop.
"""

from __future__ import annotations

import json

import pytest

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive.search import HISTORY_SEARCH_TOOL, HistorySearchTool, history_search
from contextfold.cache import GREP_TOOL, READ_TOOL, ToolOutputCache
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore
from contextfold.untrusted import MAX_ARGUMENT_CHARS, PatternTimeout, UntrustedPattern

# Against a run of a's that ends in something else, each extra character doubles the backtracking. (The issue's
# (a+)+$ runs in linear time on the regex engine; this one does not.)
EVIL_PATTERN = "(a|aa)+$"
ISSUE_PATTERN = "(a+)+$"
EVIL_LINE = "a" * 40 + "!"
# A short limit keeps the test fast; the pattern would otherwise run for days (2^40 steps).
TEST_LIMIT_S = 0.2


def cache_with_evil_line() -> tuple[ToolOutputCache, str]:
    cache = ToolOutputCache(MemoryBlobStore())
    ref = cache.put("\n".join(["header", EVIL_LINE, "footer"] * 2_000))
    return cache, ref.id


def test_a_catastrophic_pattern_is_stopped_at_its_time_limit() -> None:
    pattern = UntrustedPattern(EVIL_PATTERN, time_limit_s=TEST_LIMIT_S)
    with pytest.raises(PatternTimeout, match=r"took more than 0.2 s.*nested quantifiers"):
        pattern.search(EVIL_LINE)
    # The same engine still answers ordinary patterns, with Python's syntax.
    assert UntrustedPattern(r"foot\w+").search("footer")
    assert not UntrustedPattern(r"^a+$").search(EVIL_LINE)


def test_grep_with_a_catastrophic_pattern_comes_back_as_a_tool_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("contextfold.untrusted.regex.PATTERN_TIME_LIMIT_S", TEST_LIMIT_S)
    cache, ref = cache_with_evil_line()
    for args in ({"pattern": EVIL_PATTERN}, {"pattern": EVIL_PATTERN, "ref_id": ref}):
        result = cache.execute_tool_call(ToolCall("g1", GREP_TOOL, json.dumps(args)))
        assert result.role == "tool" and result.tool_call_id == "g1"
        assert result.text.startswith(f"error: the pattern '{EVIL_PATTERN}' took more than 0.2 s")
    # The issue's pattern, which hung > 20 s on one line with `re`, completes (the engine runs it in linear time).
    one_line = ToolOutputCache(MemoryBlobStore())
    one_line.put(EVIL_LINE)
    issue = one_line.execute_tool_call(ToolCall("g0", GREP_TOOL, json.dumps({"pattern": ISSUE_PATTERN})))
    assert issue.text == f"no match for /{ISSUE_PATTERN}/ in 1 cached output(s)"
    # A fair pattern over the same output still works.
    ok = cache.execute_tool_call(ToolCall("g2", GREP_TOOL, json.dumps({"pattern": "^foot", "max_matches": 2})))
    assert ok.text.splitlines()[1] == f"{ref}:3:footer"


def test_history_search_with_a_catastrophic_pattern_comes_back_as_a_tool_result(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("contextfold.untrusted.regex.PATTERN_TIME_LIMIT_S", TEST_LIMIT_S)
    archive = Archive(MemoryArchiveStore())
    archive.archive_transcript("s", [Message.user(EVIL_LINE), Message.assistant("done")])
    with pytest.raises(PatternTimeout):
        history_search(EVIL_PATTERN, "s", archive=archive, ignore_case=False)
    tool = HistorySearchTool(archive, "s")
    result = tool.execute_tool_call(ToolCall("h1", HISTORY_SEARCH_TOOL, json.dumps({"pattern": EVIL_PATTERN})))
    assert result.text.startswith(f"error: the pattern '{EVIL_PATTERN}' took more than 0.2 s")


# Deep enough to exhaust the recursion limit of json, small enough to pass the size check.
DEEP = "[" * 60_000
HOSTILE_ARGUMENTS = [
    ("[" * 100_000, "are 100,000 characters; keep them under 65,536"),  # the issue's case: the size cap answers
    (DEEP, "nested too deeply"),
    ('{"pattern": ' + DEEP, "nested too deeply"),
    ('{"pattern": "x"' + " " * MAX_ARGUMENT_CHARS + "}", "keep them under 65,536"),
    ('{"pattern": "' + "x" * 5_000 + '"}', "keep it under 1,000"),
    ("[1, 2]", "must be a JSON object, got list"),
    ('{"pattern": "x", "max_matches": 1e999}', "max_matches must be an integer"),
    ('{"pattern": "(" }', "invalid regular expression"),
    ('{"pattern": "' + "(" * 50_000 + '"}', "keep it under 1,000"),
]


@pytest.mark.parametrize(("arguments", "expected"), HOSTILE_ARGUMENTS)
def test_hostile_grep_arguments_come_back_as_tool_results(arguments: str, expected: str) -> None:
    cache, _ = cache_with_evil_line()
    result = cache.execute_tool_call(ToolCall("c1", GREP_TOOL, arguments))
    assert result.role == "tool" and result.text.startswith("error: ")
    assert expected in result.text


@pytest.mark.parametrize("arguments", [DEEP, '{"ref_id": ' + DEEP + "}", "x" * (MAX_ARGUMENT_CHARS + 1)])
def test_hostile_read_arguments_come_back_as_tool_results(arguments: str) -> None:
    cache, _ = cache_with_evil_line()
    result = cache.execute_tool_call(ToolCall("c1", READ_TOOL, arguments))
    assert result.text.startswith("error: the arguments of tool_output_cache ")


@pytest.mark.parametrize("arguments", [DEEP, '{"pattern": ' + DEEP + "}"])
def test_hostile_history_search_arguments_come_back_as_tool_results(arguments: str) -> None:
    tool = HistorySearchTool(Archive(MemoryArchiveStore()), "s")
    result = tool.execute_tool_call(ToolCall("h1", HISTORY_SEARCH_TOOL, arguments))
    expected = f"error: the arguments of {HISTORY_SEARCH_TOOL} are nested too deeply; send a flat JSON object"
    assert result.text == expected


def test_any_failure_inside_a_tool_comes_back_as_a_tool_result() -> None:
    class BrokenStore(MemoryBlobStore):
        def read_range(self, key: str, start: int, length: int) -> bytes:
            raise RecursionError("maximum recursion depth exceeded")

    cache = ToolOutputCache(BrokenStore())
    ref = cache.put("line\n" * 10)
    result = cache.execute_tool_call(ToolCall("c1", READ_TOOL, json.dumps({"ref_id": ref.id})))
    assert result.text == "error: tool_output_cache failed: the input is nested too deeply"
