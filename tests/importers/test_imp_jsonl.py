"""JSONL (and JSON arrays) of messages in any wire format, auto-detected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import TRAJECTORIES, require

from contextfold.importers._files import detect_source, load_session, load_sessions
from contextfold.importers._session import SessionFileError
from contextfold.messages import Message

TAU = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"
CLAUDE = TRAJECTORIES / "sweagent-claude4sonnet" / "sympy__sympy-19954.traj"
FORMATS = ("openai_chat", "openai_responses", "anthropic", "gemini")


def _formats() -> Any:
    try:
        from contextfold import formats
    except ImportError:
        formats = None
    require(formats is not None and hasattr(formats, "get_format"), "contextfold.formats is not there yet")
    return formats


def _write_jsonl(path: Path, items: list[dict[str, Any]], *, blank_lines: bool = False) -> Path:
    sep = "\n\n" if blank_lines else "\n"
    path.write_text(sep.join(json.dumps(item) for item in items) + "\n")
    return path


def _shape(messages: list[Message]) -> tuple[list[str], int, int]:
    calls = [c.name for m in messages for c in m.tool_calls]
    return calls, len(calls), sum(m.role == "tool" for m in messages)


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("recorded", [TAU, CLAUDE], ids=["tau_bench", "swe_agent"])
def test_any_wire_format_is_detected_and_keeps_every_tool_pair(tmp_path: Path, name: str, recorded: Path) -> None:
    formats = _formats()
    require(recorded.exists(), "shared data missing")
    original = load_sessions(recorded)[3 if recorded == TAU else 0]
    items = formats.get_format(name).encode(original.messages)
    path = _write_jsonl(tmp_path / "session.jsonl", items, blank_lines=True)
    assert detect_source(path) == "jsonl"
    session = load_session(path)
    assert (session.id, session.source, session.format) == ("session", "jsonl", name)
    assert _shape(session.messages) == _shape(original.messages)
    assert [m.text for m in session.messages if m.role != "system"] == [
        m.text for m in original.messages if m.role != "system"
    ]


def test_json_array_of_messages(tmp_path: Path) -> None:
    _formats()
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    (session,) = load_sessions(path)
    assert (session.source, session.format, [m.role for m in session.messages]) == (
        "jsonl",
        "openai_chat",
        ["user", "assistant"],
    )


def test_bad_lines_are_named_by_record_and_line(tmp_path: Path) -> None:
    _formats()
    path = tmp_path / "bad.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n\n{"role": "user", "content": \n')
    with pytest.raises(SessionFileError) as info:
        load_sessions(path)
    assert str(info.value).startswith(f"{path}: record 1 (line 3): invalid JSON: Expecting value")

    path.write_text(
        '{"role": "user", "content": "hi"}\n\n'
        '{"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", '
        '"function": {"name": "f", "arguments": "{oops"}}]}\n'
    )
    with pytest.raises(SessionFileError) as info:
        load_sessions(path)
    assert (info.value.record, info.value.line, info.value.field) == (1, 3, "tool_calls[0].function.arguments")

    path.write_text("[1, 2]\n")
    with pytest.raises(SessionFileError, match=r"record 0 \(line 1\): expected a JSON object per record, got array"):
        load_sessions(path)
    path.write_text("\n")
    with pytest.raises(SessionFileError, match="no messages in the file"):
        load_sessions(path)
