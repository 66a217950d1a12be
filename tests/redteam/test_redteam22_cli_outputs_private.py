"""Files ``compact -o`` and ``convert --out-dir`` write are the owner's alone, as ``archive restore``'s are.

Found on afa4c7c (red team, session 19): both wrote with the process's umask (0644 under the usual 022), so on a
shared machine every user could read them, while ``archive restore`` writes its history 0600 because it holds whole
tool outputs (file contents, command output), as do these: a compacted history keeps its recent turns' outputs
whole (with ``--no-redact``, their secrets too), and a converted session is the whole session. An existing file
written over keeps no wider mode either.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextfold.archive import Archive
from contextfold.cli import main
from contextfold.messages import Message
from contextfold.stores.archive_open import open_archive_store

SECRETISH = "DB_PASSWORD=hunter2-not-a-real-one"


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _session(tmp_path: Path) -> Path:
    path = tmp_path / "s1.jsonl"
    items = [{"role": "user", "content": "show the env"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"env\"}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": f"HOME=/root\n{SECRETISH}\n"},
             {"role": "assistant", "content": "done"}]
    path.write_text("\n".join(json.dumps(i) for i in items), encoding="utf-8")
    return path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_compact_output_is_the_owners(tmp_path: Path) -> None:
    out = tmp_path / "compacted.jsonl"
    args = ["compact", str(_session(tmp_path)), "-o", str(out), "--store", "memory", "--archive",
            str(tmp_path / "archive"), "--no-redact"]
    assert main(args) == 0
    assert _mode(out) == 0o600
    assert SECRETISH in out.read_text(encoding="utf-8")  # what makes it sensitive
    out.chmod(0o644)
    assert main(args) == 0
    assert _mode(out) == 0o600


def test_convert_outputs_are_the_owners(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    assert main(["convert", str(_session(tmp_path)), "--to", "anthropic", "--out-dir", str(folder)]) == 0
    written = folder / "s1.jsonl"
    assert _mode(written) == 0o600
    assert SECRETISH in written.read_text(encoding="utf-8")
    written.chmod(0o644)
    assert main(["convert", str(_session(tmp_path)), "--to", "anthropic", "--out-dir", str(folder)]) == 0
    assert _mode(written) == 0o600


# Found on the first fix (review of s19f): write_private made whatever it opened 0600. Run as root,
# ``compact -o /dev/null`` made the machine's /dev/null 0600 (every other user's ``> /dev/null`` then fails); as a user
# it failed with EPERM (exit 5). Only a regular file's mode is the command's to change.


def _device_node(tmp_path: Path) -> Path:
    """A node for the same device as /dev/null, so the machine's own stays untouched."""
    if os.geteuid() != 0:
        pytest.skip("a device node needs root")
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    node.chmod(0o666)
    return node


def _fifo_read_by_a_thread(tmp_path: Path) -> tuple[Path, list[bytes], threading.Thread]:
    """A FIFO (mode 0644) and a thread reading it to the end: the writer's open waits for this reader."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o644)
    fifo.chmod(0o644)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    return fifo, received, reader


def _archived(tmp_path: Path) -> Path:
    folder = tmp_path / "archive"
    folder.mkdir()
    archive = Archive(open_archive_store(str(folder)))
    archive.archive_transcript("s1", [Message(role="user", content="hi"), Message(role="assistant", content="hello")])
    return folder


def test_compact_to_a_device_leaves_its_mode(tmp_path: Path) -> None:
    node = _device_node(tmp_path)
    args = ["compact", str(_session(tmp_path)), "-o", str(node), "--store", "memory", "--archive",
            str(tmp_path / "archive")]
    assert main(args) == 0
    assert _mode(node) == 0o666  # s19f: 0o600 (for /dev/null itself: the machine's)


@pytest.mark.parametrize("command", ["compact", "restore"])
def test_a_fifo_written_to_keeps_its_mode(tmp_path: Path, command: str) -> None:
    if command == "compact":
        args = ["compact", str(_session(tmp_path)), "--store", "memory", "--archive", str(tmp_path / "archive")]
        expected = "show the env"
    else:
        args = ["archive", "restore", "s1", "--archive", str(_archived(tmp_path)), "--store", "memory"]
        expected = "hello"
    fifo, received, reader = _fifo_read_by_a_thread(tmp_path)
    try:
        assert main([*args, "-o", str(fifo)]) == 0
    finally:
        reader.join(10)
    assert expected in received[0].decode("utf-8")
    assert _mode(fifo) == 0o644  # s19f: 0o600
