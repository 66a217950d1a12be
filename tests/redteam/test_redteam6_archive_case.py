"""Two session ids never share an archive folder, on a case-insensitive file system either.

issue 21 §4, the red team's untested note: the file-system archive named a session's folder by its key as it is,
so ``Alice`` and ``alice`` (or ``org:42`` and ``Org:42``, encoded ``_org_3a42`` / ``_Org_3a42``) were two folders
on Linux and one on macOS (APFS) or Windows (NTFS) by default: each session read and appended to the other's
transcripts and events, and ``history_search`` of one returned the other's outputs. The folder name now differs
case-insensitively for any two ids. (No case-insensitive file system can be mounted here: the tests check the names
the store makes, case-folded, on the real folder.)
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.archive import Archive, archive_key
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.stores.archive_fs import FilesystemArchiveStore

ids = st.one_of(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,30}", fullmatch=True),
                st.text(min_size=1, max_size=12))


@settings(max_examples=80, deadline=None)
@given(ids, ids, st.lists(st.booleans(), max_size=40))
def test_two_ids_get_folders_that_differ_case_insensitively(a: str, other: str, flips: list[bool]) -> None:
    # b: a with some letters' case flipped (the pairs that collide on a case-insensitive file system), or another id
    b = "".join(c.swapcase() if flip else c for c, flip in zip(a, [*flips, *[False] * len(a)], strict=False)) \
        if flips else other
    store = FilesystemArchiveStore(Path("/nonexistent-root"))
    folder_a, folder_b = store._dir(archive_key(a)).name, store._dir(archive_key(b)).name
    assert (folder_a.casefold() == folder_b.casefold()) == (a == b)
    assert len(folder_a.encode()) <= 255 and folder_a == store._dir(archive_key(a)).name


def test_the_longest_id_of_capitals_fits_a_folder_name() -> None:
    store = FilesystemArchiveStore(Path("/nonexistent-root"))
    for key in ("A" * 200, "_" + "B" * 199, "a" * 200):
        assert len(store._dir(key).name.encode()) <= 255


def test_ids_differing_in_case_write_to_folders_that_differ_in_more_than_case(tmp_path: Path) -> None:
    store = FilesystemArchiveStore(tmp_path / "archive", fsync=False)
    ids_ = ["Alice", "alice", "ALICE", "org:42", "Org:42"]
    for session in ids_:
        store.write(archive_key(session), "summary-001.json", session.encode())
    folders = os.listdir(tmp_path / "archive")
    assert len({f.casefold() for f in folders}) == len(ids_)
    assert sorted(store.sessions()) == sorted(archive_key(s) for s in ids_)
    assert [store.read(archive_key(s), "summary-001.json") for s in ids_] == [s.encode() for s in ids_]


def test_a_folder_written_before_keeps_its_session(tmp_path: Path) -> None:
    # An archive written by an earlier version holds "Alice" as it is: the session finds its history there.
    legacy = tmp_path / "archive" / "Alice"
    legacy.mkdir(parents=True, mode=0o700)
    (legacy / "summary-001.json").write_bytes(b'{"summary": "from before"}')
    store = FilesystemArchiveStore(tmp_path / "archive", fsync=False)
    assert store.sessions() == ["Alice"]
    assert store.read("Alice", "summary-001.json") == b'{"summary": "from before"}'
    store.append("Alice", "events.jsonl", b"{}\n")
    assert store.names("Alice") == sorted(["summary-001.json", "events.jsonl"]) or \
        sorted(store.names("Alice")) == ["events.jsonl", "summary-001.json"]
    assert store.sessions() == ["Alice"] and store.read("alice", "summary-001.json") is None


def test_two_managers_differing_in_case_keep_their_own_archive(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    for session in ("Build-7", "build-7"):
        cm = ContextManager(model="gpt-4o", store="memory", archive=str(archive), session_id=session)
        cm.add([Message("user", f"question of {session}"), Message("assistant", f"answer for {session}")])
        cm.compact(force=True)
        cm.close()
    assert len({f.casefold() for f in os.listdir(archive) if not f.startswith(".")}) == 2
    read = Archive(FilesystemArchiveStore(archive))
    for session in ("Build-7", "build-7"):
        texts = [m.text for _, ms in read.transcripts(session) for m in ms]
        assert texts == [f"question of {session}", f"answer for {session}"]


def test_a_link_planted_under_an_earlier_name_is_not_adopted(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "summary-001.json").write_bytes(b"not the archive's")
    root = tmp_path / "archive"
    root.mkdir()
    (root / "Alice").symlink_to(outside, target_is_directory=True)
    store = FilesystemArchiveStore(root, fsync=False)
    assert store.read("Alice", "summary-001.json") is None
    store.write("Alice", "summary-001.json", b"ours")
    assert (root / "Alice").is_symlink() and (outside / "summary-001.json").read_bytes() == b"not the archive's"
    assert store.read("Alice", "summary-001.json") == b"ours" and store.sessions() == ["Alice"]
