"""convert --to anthropic names what it leaves out or makes up: another provider's reasoning dropped, an item the
API cannot carry written as a placeholder text, an opening user turn the session did not hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.cli import main

RESPONSES_SESSION = [
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking hard"}],
     "encrypted_content": "gAAAA"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "found it"}]},
    {"type": "message", "role": "user", "content": "thanks"},
]


def test_dropped_placeholder_and_made_up_parts_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = tmp_path / "resp.jsonl"
    session.write_text("".join(json.dumps(item) + "\n" for item in RESPONSES_SESSION))
    assert main(["convert", str(session), "--to", "anthropic"]) == 0
    out, err = capsys.readouterr()
    items = [json.loads(line) for line in out.splitlines()]
    assert items[0] == {"role": "user", "content": "[earlier conversation compacted; continuing]"}
    assert items[1]["content"][0] == {"type": "text", "text": "[web_search_call part not representable in anthropic]"}
    assert not any(b.get("type") in ("thinking", "redacted_thinking") for item in items
                   if isinstance(item["content"], list) for b in item["content"])
    for change in ("dropped 1 reasoning part (another provider's state, which the API cannot read)",
                   "wrote 1 web_search_call part the API cannot carry as a placeholder text",
                   "opened the conversation with the user message '[earlier conversation compacted; continuing]', "
                   "which the session did not hold"):
        assert change in err


def test_a_text_the_session_held_spelled_like_a_placeholder_is_no_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = tmp_path / "chat.jsonl"
    held = "[image part not representable in anthropic]"
    session.write_text("".join(json.dumps(item) + "\n" for item in [
        {"role": "user", "content": [{"type": "text", "text": held}]}, {"role": "assistant", "content": "ok"}]))
    assert main(["convert", str(session), "--to", "anthropic"]) == 0
    assert capsys.readouterr().err == ""
