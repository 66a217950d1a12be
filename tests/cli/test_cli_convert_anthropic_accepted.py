"""``contextfold convert --to anthropic`` writes what the Anthropic Messages API accepts, and says what it changed.

Checked with the API's documented rules (``_anthropic_rules``) over every shared session and over histories
hypothesis draws (valid ones, and ones whose tool pairing an agent broke), written as Chat JSONL and converted.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from _anthropic_rules import refusals
from conftest import TRAJECTORIES, require
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.cli import main
from contextfold.formats import anthropic, openai_chat
from contextfold.messages import Message
from contextfold.pairing import CONTINUATION_TEXT

try:
    from formats.strategies import broken_histories, histories
except ModuleNotFoundError:  # tests/ made a package
    from tests.formats.strategies import broken_histories, histories


def convert(session: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[dict[str, Any]], str]:
    """The converted lines and what the command wrote to stderr."""
    assert main(["convert", str(session), "--to", "anthropic"]) == 0
    out, err = capsys.readouterr()
    return [json.loads(line) for line in out.split("\n") if line], err  # (not splitlines: U+0085 is in texts)


def write_chat_session(folder: Path, messages: list[Message]) -> Path:
    path = folder / "session.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in openai_chat.encode(messages)))
    return path


def said(items: list[dict[str, Any]]) -> list[str]:
    """The texts of the conversation's user and assistant text blocks, in order (what the model reads them say)."""
    texts = []
    for item in items:
        if item["role"] not in ("user", "assistant"):
            continue
        content = item["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts.extend(b["text"] for b in blocks if b["type"] == "text" and b["text"].strip())
    return [t for t in texts if t != CONTINUATION_TEXT]


def test_every_shared_session_converts_to_what_the_api_accepts(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    require(TRAJECTORIES.is_dir(), "shared data missing")
    assert main(["convert", str(TRAJECTORIES), "--to", "anthropic", "--out-dir", str(tmp_path)]) == 0
    # One change only, in tau-bench's sessions: gpt-4o's call ids come back in later turns (49 of the 200)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 49
    assert all(re.fullmatch(r"contextfold: session gpt-4o-airline/\d+-\d+: changed to be accepted by the Anthropic "
                            r"Messages API: renamed \d+ calls? reusing an earlier call's id \(the API takes each id "
                            r"once\)", line) for line in lines), lines[:3]
    files = sorted(tmp_path.rglob("*.jsonl"))
    assert len(files) == 272
    for file in files:
        assert refusals([json.loads(line) for line in file.read_text().split("\n") if line]) == [], file


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=st.one_of(histories(), broken_histories()))
def test_any_drawn_history_converts_to_what_the_api_accepts_keeping_what_was_said(
        history: list[Message], capsys: pytest.CaptureFixture[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        session = write_chat_session(Path(folder), history)
        items, err = convert(session, capsys)
    assert refusals(items) == []
    anthropic.validate(items)
    # merged and moved, never lost: every non-blank text, in order (as the plain conversion wrote them); every call,
    # with its arguments
    plain = anthropic.encode(openai_chat.decode(openai_chat.encode(history)))
    expected = said(plain)
    if expected and items[-1]["role"] == "assistant":
        expected[-1] = expected[-1].rstrip()  # (a final assistant turn's trailing whitespace is trimmed)
    assert said(items) == expected
    calls = [(c.name, c.parsed_arguments()) for m in history for c in m.tool_calls]
    sent = [(b["name"], b["input"]) for item in items if isinstance(item["content"], list)
            for b in item["content"] if b["type"] == "tool_use"]
    assert len(sent) <= len(calls) and all(call in calls for call in sent)
    assert (err == "") == (items == plain)


def test_each_change_is_named_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from contextfold.messages import TextPart, ToolCall

    history = [
        Message.user("fix the parser"),
        Message.assistant("Looking.", [ToolCall("functions.bash:0", "bash", '{"cmd": "pytest"}')]),
        Message.tool("functions.bash:0", "2 failed"),
        Message.system("Reminder: keep answers short."),
        Message.assistant("Two tests fail."),
        Message.assistant(" ", [ToolCall("c2", "edit", '{"path": "p.py"}')]),
        Message.tool("c2", "edited"),
        Message.tool("ghost", "an output whose call was never recorded"),
        Message.user((TextPart("and the docs"), TextPart("  "))),
        Message.user("please"),
        Message.assistant("On it.\n"),
    ]
    items, err = convert(write_chat_session(tmp_path, history), capsys)
    assert refusals(items) == []
    assert err.startswith("contextfold: session session: changed to be accepted by the Anthropic Messages API: ")
    for change in ("moved 1 system message to the head", "dropped 2 blank text blocks",
                   "dropped 1 tool result that answers no call before it",
                   "renamed 1 tool call id the API refuses",
                   "merged 2 turns into the turn of the same role before them",
                   "trimmed the trailing whitespace of the final assistant turn"):
        assert change in err
    assert items[0] == {"role": "system", "content": "Reminder: keep answers short."}
    assert [item["role"] for item in items[1:]] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert items[4]["content"] == [
        {"type": "text", "text": "Two tests fail."},
        {"type": "tool_use", "id": "c2", "name": "edit", "input": {"path": "p.py"}},
    ]
    assert items[5]["content"] == [{"type": "tool_result", "tool_use_id": "c2", "content": "edited"},
                                   {"type": "text", "text": "and the docs"}, {"type": "text", "text": "please"}]
    assert items[6] == {"role": "assistant", "content": "On it."}
