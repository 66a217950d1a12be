"""The filesystem archive and the local stores stay inside their folders (issue 21 §4): real files, links and modes.

A symbolic link planted as a session's ``events.jsonl`` or as a session folder sent events and transcripts outside
the archive; a pre-created 0777 session folder was used as it was. Now such links are refused (never followed,
never written through) and a folder others could write is made the owner's first.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from contextfold.archive import Archive
from contextfold.errors import CorruptRecord, StoreError
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.stores.archive_fs import FilesystemArchiveStore

EVENTS = "events.jsonl"


def compacting_manager(archive: Path, session_id: str = "s1", **kw: object) -> ContextManager:
    """A manager whose first prepare() compacts (30 long messages in an 8K window) and archives a transcript."""
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive=str(archive),
                        session_id=session_id, **kw)  # type: ignore[arg-type]
    cm.add([Message.user(f"request {i} " + "word " * 500) if i % 2 == 0 else Message.assistant(f"reply {i}")
            for i in range(30)])
    return cm


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_link_planted_as_events_jsonl_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own file\n")
    root = tmp_path / "archive"
    (root / "s1").mkdir(parents=True, mode=0o700)
    (root / "s1" / EVENTS).symlink_to(outside)
    archive = Archive(FilesystemArchiveStore(root, fsync=False))
    with pytest.raises(StoreError, match="symbolic link"):
        archive.append_events("s1", [{"name": "x"}])
    # Through a whole session: the events go nowhere rather than through the link.
    cm = compacting_manager(root)
    cm.prepare()
    cm.close()
    assert cm.compactions == 1
    assert outside.read_text() == "the user's own file\n"
    assert (root / "s1" / EVENTS).is_symlink()
    # The transcript itself landed inside the archive, as a plain file of ours.
    [transcript] = [p for p in (root / "s1").iterdir() if p.name.startswith("transcript-")]
    assert not transcript.is_symlink() and mode(transcript) == 0o600


def test_a_session_folder_that_is_a_link_is_refused_and_nothing_lands_where_it_points(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "archive"
    root.mkdir(mode=0o700)
    (root / "s1").symlink_to(elsewhere, target_is_directory=True)
    store = FilesystemArchiveStore(root, fsync=False)
    with pytest.raises(StoreError, match="symbolic link"):
        store.write("s1", "summary-001.json", b"{}")
    with pytest.raises(StoreError, match="symbolic link"):
        store.append("s1", EVENTS, b"{}\n")
    with pytest.raises(StoreError, match="symbolic link"):
        compacting_manager(root).prepare()
    assert list(elsewhere.iterdir()) == []
    # A linked folder is not one of the archive's sessions, and reading through it finds nothing.
    assert store.sessions() == []


def test_reads_never_follow_a_planted_link_either(tmp_path: Path) -> None:
    secret = tmp_path / "other-session.jsonl"
    secret.write_text(json.dumps({"role": "tool", "content": "another session's output", "tool_call_id": "c"}))
    root = tmp_path / "archive"
    store = FilesystemArchiveStore(root, fsync=False)
    store.write("s1", "summary-001.json", b"{}")
    (root / "s1" / "transcript-pre-compact-001.jsonl").symlink_to(secret)
    # Listed (a transcript that vanished from listings went unnoticed), never read: the restore names it.
    assert store.names("s1") == ["summary-001.json", "transcript-pre-compact-001.jsonl"]
    with pytest.raises(StoreError, match="symbolic link"):
        store.read("s1", "transcript-pre-compact-001.jsonl")
    with pytest.raises(CorruptRecord, match="symbolic link"):
        Archive(store).restore_history("s1")
    assert Archive(store).restore_history("s1", on_bad_line=lambda problem: None) == []


def test_a_hard_link_or_a_fifo_planted_in_a_session_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    store = FilesystemArchiveStore(root, fsync=False)
    store.write("s1", "summary-001.json", b"{}")
    outside = tmp_path / "authorized_keys"
    outside.write_text("ssh-ed25519 AAAA me\n")
    os.link(outside, root / "s1" / EVENTS)
    with pytest.raises(StoreError, match="hard links"):
        store.append("s1", EVENTS, b"appended\n")
    assert outside.read_text() == "ssh-ed25519 AAAA me\n"
    os.mkfifo(root / "s1" / "summary-002.json")
    with pytest.raises(StoreError, match="not a regular file"):  # and it does not wait for a writer
        store.read("s1", "summary-002.json")


def test_a_transcript_being_written_exclusively_stays_readable_while_its_temporary_twin_exists(tmp_path: Path) -> None:
    # An exclusive write links its temporary file to the name and then unlinks the temporary: a reader in between
    # sees two links, both the archive's own. That must not read as a planted hard link.
    root = tmp_path / "archive"
    store = FilesystemArchiveStore(root, fsync=False)
    store.write("s1", "summary-001.json", b"{}")
    os.link(root / "s1" / "summary-001.json", root / "s1" / ".tmp-0123456789abcdef")
    assert store.read("s1", "summary-001.json") == b"{}"
    os.link(root / "s1" / "summary-001.json", root / "s1" / "planted")
    with pytest.raises(StoreError, match="3 hard links"):
        store.read("s1", "summary-001.json")


def test_a_world_writable_session_folder_is_made_the_owners_before_anything_is_written(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    (root / "s1").mkdir(parents=True)
    os.chmod(root / "s1", 0o777)
    cm = compacting_manager(root)
    cm.prepare()
    cm.close()
    assert mode(root / "s1") == 0o700
    assert {mode(p) for p in (root / "s1").iterdir()} == {0o600}


def test_a_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a folder to another user")
    root = tmp_path / "archive"
    (root / "s1").mkdir(parents=True)
    os.chown(root / "s1", 12345, 12345)
    with pytest.raises(StoreError, match="another user"):
        FilesystemArchiveStore(root, fsync=False).write("s1", "summary-001.json", b"{}")
    assert list((root / "s1").iterdir()) == []


@pytest.mark.parametrize("which", ["outputs", "sessions"])
@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_the_local_stores_refuse_a_planted_database_link(tmp_path: Path, which: str, suffix: str) -> None:
    from contextfold.stores.local import DEFAULT_FILENAME, LocalBlobStore
    from contextfold.stores.session_local import DEFAULT_SESSIONS_FILENAME, LocalSessionStore

    outside = tmp_path / "elsewhere.db"
    outside.write_bytes(b"")
    folder = tmp_path / ".contextfold"
    folder.mkdir(mode=0o700)
    opener, filename = ((LocalBlobStore, DEFAULT_FILENAME) if which == "outputs"
                        else (LocalSessionStore, DEFAULT_SESSIONS_FILENAME))
    (folder / f"{filename}{suffix}").symlink_to(outside)
    with pytest.raises(StoreError, match="symbolic link"):
        opener(folder)
    assert outside.read_bytes() == b""
