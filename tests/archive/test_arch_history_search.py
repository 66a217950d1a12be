"""history_search: the agent finds what compaction took out of its view; bad calls get readable tool results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive.search import (
    HISTORY_SEARCH_TOOL,
    MAX_HIT_CHARS,
    HistorySearchTool,
    history_search,
    history_search_schema,
)
from contextfold.messages import Message, ToolCall
from contextfold.stores.archive_fs import FilesystemArchiveStore

SESSION = "agent-7"


def _archive(store: object = None) -> Archive:
    archive = Archive(store if store is not None else MemoryArchiveStore())  # type: ignore[arg-type]
    first = [
        Message.system("You are a coding agent.", meta={"id": "m0"}),
        Message.user("The deploy key lives in /etc/deploy/KEY_PATH; never print it.", meta={"id": "m1"}),
        Message.assistant("", [ToolCall("c1", "bash", '{"cmd": "pytest tests/test_parser.py"}')], meta={"id": "m2"}),
        Message.tool("c1", "FAILED tests/test_parser.py::test_unicode - AssertionError\n1 failed", name="bash",
                     meta={"id": "m3"}),
    ]  # fmt: skip
    archive.archive_transcript(SESSION, first)
    # The second transcript repeats m0..m3 (the view kept them) and adds a cut output.
    second = [
        *first,
        Message.user("<summary>...</summary>", meta={"kind": "summary", "id": "s1"}),
        Message.tool("c2", "head of log\n[cut; ref=tout_1]", name="bash",
                     meta={"id": "m4", "kind": "truncated", "ref": "tout_1"}),
    ]  # fmt: skip
    archive.archive_transcript(SESSION, second)
    return archive


def _call(args: object, name: str = HISTORY_SEARCH_TOOL) -> ToolCall:
    return ToolCall("hs1", name, args if isinstance(args, str) else json.dumps(args))


def test_finds_each_archived_message_once() -> None:
    result = history_search("test_parser", SESSION, archive=_archive())
    assert result.transcripts == 2 and result.messages_searched == 5  # summary dropped, repeats merged
    assert [(h.index, h.role) for h in result.hits] == [(2, "assistant"), (3, "tool")]
    assert result.hits[1].tool_name == "bash" and result.hits[1].message_id == "m3"
    text = result.format()
    assert "2 matching lines" in text and "#3 tool (bash) L1: FAILED tests/test_parser.py" in text


def test_role_filter_case_and_limits() -> None:
    archive = _archive()
    assert [h.role for h in history_search("KEY_PATH", SESSION, archive=archive, role="user").hits] == ["user"]
    assert history_search("key_path", SESSION, archive=archive, ignore_case=False).total_hits == 0
    many = history_search(".", SESSION, archive=archive, max_results=2)
    assert len(many.hits) == 2 and many.total_hits > 2
    assert f"{many.total_hits - 2} more" in many.format()


def test_cut_outputs_point_to_their_ref_and_are_searched_in_full_with_resolve_ref() -> None:
    archive = _archive()
    assert history_search("needle", SESSION, archive=archive).total_hits == 0
    hit = history_search("head of log", SESSION, archive=archive).hits[0]
    assert hit.ref == "tout_1" and "ref=tout_1" in hit.format()
    full = {"tout_1": "head of log\n" + "noise\n" * 50 + "the needle is here\n"}
    found = history_search("needle", SESSION, archive=archive, resolve_ref=full.__getitem__)
    assert [(h.index, h.line_number) for h in found.hits] == [(4, 52)]


def test_long_lines_are_clipped() -> None:
    archive = Archive(MemoryArchiveStore())
    archive.archive_transcript("s", [Message.tool("c", "x" * 10_000 + "MATCH", name="cat")])
    hit = history_search("MATCH", "s", archive=archive).hits[0]
    assert len(hit.text) < MAX_HIT_CHARS + 40 and "+9705 chars" in hit.text


def test_nothing_archived_yet() -> None:
    result = history_search("x", "fresh", archive=Archive(MemoryArchiveStore()))
    assert result.transcripts == 0 and "nothing has been archived" in result.format()


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses", "anthropic"])
def test_schemas(fmt: str) -> None:
    schema = history_search_schema(fmt)
    params = {"openai_chat": lambda s: s["function"]["parameters"], "openai_responses": lambda s: s["parameters"],
              "anthropic": lambda s: s["input_schema"]}[fmt](schema)  # fmt: skip
    name = schema["function"]["name"] if fmt == "openai_chat" else schema["name"]
    assert name == HISTORY_SEARCH_TOOL
    assert params["required"] == ["pattern"]
    params["properties"]["pattern"]["zz_mutated"] = 1  # callers may mutate their copy
    assert "zz_mutated" not in json.dumps(history_search_schema(fmt))
    json.dumps(schema)


def test_schema_unknown_format() -> None:
    with pytest.raises(ValueError, match="format must be one of"):
        history_search_schema("gemini")


def test_executor_answers_a_call(tmp_path: Path) -> None:
    tool = HistorySearchTool(_archive(FilesystemArchiveStore(tmp_path)), SESSION)
    call = _call({"pattern": "deploy key", "max_results": "5"})
    assert tool.handles(call)
    answer = tool.execute_tool_call(call)
    assert (answer.role, answer.tool_call_id, answer.name) == ("tool", "hs1", HISTORY_SEARCH_TOOL)
    assert "#1 user L1: The deploy key lives in" in answer.text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({}, "pattern is required"),
        ({"pattern": ""}, "pattern is required"),
        ({"pattern": "x", "colour": "red"}, "does not take colour"),
        ({"pattern": "(unclosed"}, "not a valid regular expression"),
        ({"pattern": "x", "role": "robot"}, "role must be one of"),
        ({"pattern": "x", "max_results": 0}, "max_results must be between 1 and"),
        ({"pattern": "x", "max_results": "lots"}, "max_results must be an integer"),
        ({"pattern": "x", "ignore_case": "yes"}, "ignore_case must be true or false"),
        ({"pattern": "x" * 2000}, "keep it under"),
    ],
)
def test_bad_calls_become_error_results(args: object, expected: str) -> None:
    answer = HistorySearchTool(_archive(), SESSION).execute_tool_call(_call(args))
    assert answer.role == "tool" and answer.tool_call_id == "hs1"
    assert answer.text.startswith("error: ") and expected in answer.text


def test_wrong_tool_name_and_bad_session() -> None:
    tool = HistorySearchTool(_archive(), SESSION)
    assert not tool.handles(_call({}, name="bash"))
    assert "unknown tool 'bash'" in tool.execute_tool_call(_call({"pattern": "x"}, name="bash")).text
    bad = HistorySearchTool(_archive(), "").execute_tool_call(_call({"pattern": "x"}))
    assert bad.text.startswith("error: session_id")
    # A path-like id is encoded by the archive (issue 21 §4), not refused, and reads nothing outside its folder.
    pathlike = HistorySearchTool(_archive(), "../etc").execute_tool_call(_call({"pattern": "x"}))
    assert pathlike.text.startswith("history_search: nothing has been archived yet")


def test_a_corrupt_archive_line_is_skipped_and_counted(tmp_path: Path) -> None:
    store = FilesystemArchiveStore(tmp_path)
    store.write(SESSION, "transcript-pre-compact-001.jsonl", b"{broken\n")
    answer = HistorySearchTool(Archive(store), SESSION).execute_tool_call(_call({"pattern": "x"}))
    assert answer.text.startswith("history_search: 0 matching lines for /x/ in 0 archived messages "
                                  "(1 unreadable archived line skipped)")
