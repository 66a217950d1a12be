"""convert --to anthropic writes a Chat call whose arguments are JSON but no object (Chat takes them; Anthropic's
``input`` must be an object) as the proxy sends them, and says so; the other sessions of the folder are written too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.cli import main
from contextfold.formats.intake import UNPARSED_ARGUMENTS


def write_session(folder: Path, name: str, arguments: str) -> None:
    items = [{"role": "user", "content": "go"},
             {"role": "assistant", "content": None,
              "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "r"}]
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items))


@pytest.mark.parametrize("arguments", ["null", '"a text"', "[1, 2]", "3"])
def test_arguments_that_are_no_object_are_wrapped_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            arguments: str) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    write_session(sessions, "a_odd", arguments)
    write_session(sessions, "b_plain", '{"q": 1}')
    out = tmp_path / "out"
    assert main(["convert", str(sessions), "--to", "anthropic", "--out-dir", str(out)]) == 0
    odd = [json.loads(line) for line in (out / "a_odd.jsonl").read_text().splitlines()]
    plain = [json.loads(line) for line in (out / "b_plain.jsonl").read_text().splitlines()]
    assert odd[1]["content"] == [{"type": "tool_use", "id": "c1", "name": "f",
                                  "input": {UNPARSED_ARGUMENTS: arguments}}]
    assert plain[1]["content"][0]["input"] == {"q": 1}
    err = capsys.readouterr().err
    assert ("contextfold: session a_odd: changed to be accepted by the Anthropic Messages API: wrapped the arguments "
            "of 1 call that are not a JSON object as {'unparsed_arguments': <the text>}") in err
    assert "b_plain" not in err


def test_a_session_still_refused_names_its_own_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the late system message moves to the head of the output (its message 0): the error names the session's 3
    session = tmp_path / "late_system.jsonl"
    session.write_text("".join(json.dumps(item) + "\n" for item in [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"},
        {"role": "system", "content": [{"type": "text", "text": "s"},
                                       {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": "d"}]))
    assert main(["convert", str(session), "--to", "anthropic"]) == 2
    assert capsys.readouterr().err == (
        f"contextfold: {session}: session late_system: cannot write as anthropic: message 3: in the converted turn, "
        "content[1].type: system content must be text blocks\n")
