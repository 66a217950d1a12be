"""What a manager leaves on the machine: nothing open after close(), private files, a bounded event log."""

from __future__ import annotations

import gc
import json
import os
import stat
import threading
from pathlib import Path

import pytest

from contextfold._files import ORPHAN_GRACE_S, rotate
from contextfold.exporters.jsonl import JsonlExporter
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.stores.archive_fs import FilesystemArchiveStore

MANAGERS = 100


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def big_turn() -> list[Message]:
    call = ToolCall("c1", "bash", json.dumps({"cmd": "cat log"}))
    text = "\n".join(f"log line {i} " + "y" * 70 for i in range(1_000))
    return [Message.user("look"), Message.assistant("", [call]), Message.tool("c1", text, name="bash")]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to count file descriptors")
def test_closing_100_managers_releases_every_descriptor_and_thread(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    warm = ContextManager("gpt-4o", session_id="warm")  # loads the tokenizer and imports once
    warm.add(big_turn())
    warm.close()
    # Earlier tests' garbage (cycles holding files) may still wait for a full collection, which could then run in
    # the loop below and close their files: the count is of this test's managers only.
    gc.collect()
    fds, threads = open_fds(), threading.active_count()
    archive = FilesystemArchiveStore(tmp_path / ".contextfold" / "archive", fsync=False)
    for n in range(MANAGERS):
        # The default local store, and the default archive folder without fsync (only to keep the test fast).
        cm = ContextManager("gpt-4o", session_id=f"s{n}", telemetry=["jsonl:events.jsonl"], archive=archive)
        cm.add([Message.user(f"task {n}"), Message.assistant("done")])  # the store is opened by the constructor
        cm.prepare()
        cm.close()
        cm.close()  # idempotent
    assert open_fds() == fds
    assert threading.active_count() == threads
    assert len(archive.sessions()) == MANAGERS + 1


def test_state_is_private_and_ignored_by_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    os.umask(0o022)  # the usual umask, which would give 0644 files and 0755 folders
    with ContextManager("gpt-4o", session_id="p", telemetry=["jsonl:.contextfold/events.jsonl"]) as cm:
        cm.add(big_turn())
        cm.compact()
    state = tmp_path / ".contextfold"
    assert (state / ".gitignore").read_text().splitlines()[-1] == "*"
    written = [p for p in state.rglob("*")]
    assert {p.name for p in written} >= {"tool_outputs.sqlite3", "events.jsonl", "archive", "p", ".gitignore",
                                         "transcript-pre-compact-001.jsonl"}
    for path in [state, *written]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path} is {oct(mode)}"


def test_orphan_temp_files_of_a_killed_writer_are_removed_on_open(tmp_path: Path) -> None:
    folder = tmp_path / "s1"
    folder.mkdir()
    orphan = folder / ".tmp-abc123"
    orphan.write_bytes(b"half a transcript")
    old = orphan.stat().st_mtime - ORPHAN_GRACE_S - 1
    os.utime(orphan, (old, old))
    in_flight = folder / ".tmp-def456"  # another process is writing this one right now
    in_flight.write_bytes(b"being written")
    store = FilesystemArchiveStore(tmp_path, fsync=False)
    store.write("s1", "summary-001.json", b"{}")
    assert sorted(p.name for p in folder.iterdir()) == [".tmp-def456", "summary-001.json"]


def test_the_archive_event_log_rotates_and_stays_bounded(tmp_path: Path) -> None:
    store = FilesystemArchiveStore(tmp_path, fsync=False, append_max_bytes=1_000, append_keep=2)
    line = b'{"event": "x", "pad": "' + b"p" * 80 + b'"}\n'
    for _ in range(100):
        store.append("s", "events.jsonl", line)
    files = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert files == ["events.jsonl", "events.jsonl.1", "events.jsonl.2"]
    sizes = [(tmp_path / "s" / f).stat().st_size for f in files]
    assert all(size <= 1_000 + len(line) for size in sizes)
    # Whole lines only, in every file.
    for f in files:
        assert all(json.loads(x)["event"] == "x" for x in (tmp_path / "s" / f).read_text().splitlines())


def test_the_jsonl_exporter_rotates(tmp_path: Path) -> None:
    target = tmp_path / "logs" / "events.jsonl"
    exporter = JsonlExporter(target, max_bytes=500, keep=1)
    for n in range(50):
        exporter.export([{"n": n, "pad": "q" * 40}])
    assert sorted(p.name for p in target.parent.iterdir()) == ["events.jsonl", "events.jsonl.1"]
    last = [json.loads(x)["n"] for x in target.read_text().splitlines()]
    assert last[-1] == 49
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_rotate_keeps_nothing_when_asked(tmp_path: Path) -> None:
    target = tmp_path / "e.jsonl"
    target.write_bytes(b"x" * 10)
    assert rotate(target, max_bytes=5, keep=0)
    assert not target.exists()
    assert not rotate(target, max_bytes=5, keep=0)


def test_managers_computing_in_the_background_share_the_workers() -> None:
    # A thread per manager (issue 21 §5: 200 managers dropped without close() left 402 threads). (No archive: its
    # events file is the next test's.)
    before = threading.active_count()
    managers = []
    for n in range(20):
        cm = ContextManager("gpt-4o", max_context_tokens=4_000, store="memory", archive=False,
                            session_id=f"bg{n}", background=True)
        cm.add([Message.user(f"step {k}: " + "look at the parser again " * 60) for k in range(8)])
        future = cm.compact_in_background()
        assert future is not None
        future.result()
        managers.append(cm)
    assert threading.active_count() - before <= 2  # the shared workers (WORKERS), whatever the managers
    for cm in managers:
        cm.close()


def test_idle_managers_hold_no_thread_of_their_own_for_their_archive_events() -> None:
    # Issue 22: the archive's events file had a telemetry thread per manager (1,000 idle managers, 1,000 threads).
    first = ContextManager("gpt-4o", store="memory", archive="memory", session_id="first")
    first.add([Message.user("task"), Message.assistant("ok")])
    first.prepare()  # (started what a process starts once: the shared telemetry thread, the tokenizer's loading)
    before = threading.active_count()
    managers = []
    for n in range(25):
        cm = ContextManager("gpt-4o", store="memory", archive="memory", session_id=f"idle{n}")
        cm.add([Message.user(f"task {n}"), Message.assistant("ok")])
        cm.prepare()
        managers.append(cm)
    assert threading.active_count() == before
    for cm in [first, *managers]:
        cm.close()
    events = managers[7].archive.events("idle7")  # each manager's events still reach its own session's file
    assert events and {e["session_id"] for e in events} == {"idle7"}
