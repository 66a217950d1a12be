"""/compact and /context for interactive agents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.errors import SummarizerError
from contextfold.integrations.slash import COMMANDS, handle_command
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.testing.summarizer import ScriptedSummarizer


def manager(tmp_path: Path, summarizer: object = "extractive") -> ContextManager:
    cm = ContextManager("gpt-4o", max_context_tokens=60_000, store="memory", archive=str(tmp_path / "a"),
                        summarizer=summarizer, session_id="s")
    cm.add([Message.system("rules"), Message.user("fix the parser")])
    for i in range(12):
        call = ToolCall(f"c{i}", "bash", json.dumps({"cmd": i}))
        cm.add([Message.assistant(f"step {i}", [call]), Message.tool(call.id, f"output {i} " * 100, name="bash")])
    return cm


def test_compact_with_instructions(tmp_path: Path) -> None:
    summarizer = ScriptedSummarizer(["<summary>parser fixed halfway</summary>"])
    cm = manager(tmp_path, summarizer)
    before = cm.tokens()
    line = handle_command(cm, "  /compact keep the failing test names ")
    assert line is not None and line.startswith("compacted ") and "\n" not in line
    assert summarizer.requests[0].instructions == "keep the failing test names"
    assert cm.tokens() < before and cm.compactions == 1


def test_context_reports_the_status_line(tmp_path: Path) -> None:
    cm = manager(tmp_path)
    line = handle_command(cm, "/context")
    assert line == cm.status().line() and "60,000" in line
    assert handle_command(cm, "/compact_status") == line  # 004 §Risk 4's name


def test_compaction_failure_is_reported_not_raised(tmp_path: Path) -> None:
    cm = manager(tmp_path, ScriptedSummarizer([SummarizerError("endpoint down")]))
    line = handle_command(cm, "/compact")
    assert line is not None and line.startswith("compaction failed: SummarizerError") and "endpoint down" in line


def test_nothing_to_compact(tmp_path: Path) -> None:
    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    cm.add(Message.user("hi"))
    line = handle_command(cm, "/COMPACT")
    assert line is not None and line.startswith("nothing to compact: ") and line.endswith(" in 1 messages")
    assert [m.text for m in cm.messages()] == ["hi"]


@pytest.mark.parametrize("text", ["hello", "/compacted", "/help", "compact", "", " /contexts", "please /compact"])
def test_other_text_is_left_alone(tmp_path: Path, text: str) -> None:
    cm = manager(tmp_path)
    assert handle_command(cm, text) is None
    assert cm.compactions == 0


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=40))
def test_only_the_known_commands_are_handled(text: str) -> None:
    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    cm.add(Message.user("hi"))
    result = handle_command(cm, text)
    words = text.split()
    assert (result is not None) == bool(words and words[0].lower() in COMMANDS)
