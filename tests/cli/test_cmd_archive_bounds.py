"""``contextfold archive restore`` as a user runs it (a subprocess): what it writes, and what it refuses to read.

Issue 21 §4: the restored file held whole, unredacted tool outputs with mode 0644; a forged archive line pulled
another session's output into it; a deeply nested line ended in ``internal error: RecursionError``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import contextfold
from contextfold.archive import transcript_name
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.serialize import message_to_dict
from contextfold.stores.archive_fs import FilesystemArchiveStore

SRC = Path(contextfold.__file__).resolve().parents[1]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real command in a child process with the usual umask (022: new files 0644 unless made otherwise)."""
    return subprocess.run([sys.executable, "-m", "contextfold", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=120, check=False,
                          preexec_fn=lambda: os.umask(0o022))


def archived_session(root: Path, session_id: str, output: str) -> None:
    """A session whose 2,000-line output was cut at write time, archived (with its transcript) by finish()."""
    with ContextManager("gpt-4o", store=f"local://{root / 'store'}", archive=str(root / "archive"),
                        session_id=session_id) as cm:
        cm.add([Message.user("read it"), Message.assistant("", [ToolCall("c1", "cat", "{}")]),
                Message.tool("c1", output, name="cat"), Message.assistant("done")])
        cm.prepare()
        assert cm.messages()[2].kind == "truncated"


def own_output(tag: str) -> str:
    return "\n".join(f"{tag} line {i}: AKIA-shaped value kept verbatim in the cache" for i in range(2_000))


def test_restore_writes_the_whole_history_readable_by_the_owner_only(tmp_path: Path) -> None:
    archived_session(tmp_path, "s1", own_output("mine"))
    done = cli("archive", "restore", "s1", "--archive", "archive", "--store", "local://store", "-o", "out.jsonl",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out.jsonl"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    items = [json.loads(line) for line in out.read_text().splitlines()]
    assert items[2]["content"] == own_output("mine")  # the whole output, which is why it is 0600
    # An existing file written over is made 0600 too, before the history goes in.
    out.write_text("old")
    out.chmod(0o644)
    assert cli("archive", "restore", "s1", "--archive", "archive", "--store", "local://store", "-o", "out.jsonl",
               cwd=tmp_path).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_a_forged_line_naming_another_sessions_ref_restores_as_the_view_it_claims(tmp_path: Path) -> None:
    archived_session(tmp_path, "other", own_output("theirs"))
    theirs = [ref for ref in (tmp_path / "archive" / "other").iterdir() if ref.name.startswith("transcript")]
    ref = next(json.loads(line)["meta"]["ref"] for line in theirs[0].read_text().splitlines()
               if json.loads(line).get("meta", {}).get("ref"))
    forged = [Message.user("go", meta={"id": "u"}),
              Message.assistant("", [ToolCall("c9", "cat", "{}")], meta={"id": "a"}),
              Message.tool("c9", "a short view", name="cat", meta={"id": "t", "kind": "truncated", "ref": ref})]
    FilesystemArchiveStore(tmp_path / "archive").write(
        "mine", transcript_name(1), "".join(json.dumps(message_to_dict(m)) + "\n" for m in forged).encode())
    done = cli("archive", "restore", "mine", "--archive", "archive", "--store", "local://store", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "theirs line" not in done.stdout
    assert json.loads(done.stdout.splitlines()[-1])["content"] == "a short view"


def test_a_deeply_nested_or_torn_line_is_skipped_with_a_warning_not_an_internal_error(tmp_path: Path) -> None:
    archived_session(tmp_path, "s1", own_output("mine"))
    [transcript] = [p for p in (tmp_path / "archive" / "s1").iterdir() if p.name.startswith("transcript")]
    lines = transcript.read_bytes().splitlines()
    nested = b'{"role": "user", "content": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    transcript.write_bytes(b"\n".join([lines[0], nested, *lines[1:], b'{"role": "assist']) + b"\n")
    done = cli("archive", "restore", "s1", "--archive", "archive", "--store", "local://store", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr
    assert f"contextfold: warning: skipped s1/{transcript.name} line 2: invalid JSON: arrays or objects nested " \
           "too deeply to read" in done.stderr
    assert f"skipped s1/{transcript.name} line {len(lines) + 2}: not JSON" in done.stderr
    assert [json.loads(line)["role"] for line in done.stdout.splitlines()] == ["user", "assistant", "tool",
                                                                                "assistant"]
