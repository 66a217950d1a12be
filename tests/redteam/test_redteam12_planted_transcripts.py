"""A transcript replaced by a FIFO, a socket or a link must be reported, never dropped from the listing silently.

Found by the twelfth red team (open since the eleventh stop): the filesystem archive listed only plain files, so a
transcript someone replaced by a FIFO (or a link, a socket) vanished from ``transcript_numbers()``: ``transcripts()``
and ``restore_history()`` returned the others without a word (a restore missing a compaction's messages looked
whole), ``contextfold archive restore`` printed no warning, and ``contextfold status`` counted one compaction less.
Now such an entry is listed; reading it is refused (``CorruptRecord``, a record contextfold did not write, naming
the file), reported through ``on_bad_line`` where the caller reads tolerantly, and never opened for a blocking read;
the next compaction's transcript takes the next free number.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from planting import plant_unix_socket

from contextfold.archive import Archive, archive_key
from contextfold.errors import CorruptRecord
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.stores.archive_fs import FilesystemArchiveStore

NONCE = "rt12-planted-8Hc3"
SECOND = "transcript-pre-compact-002.jsonl"


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    plant_unix_socket(path)


def _link(path: Path) -> None:
    elsewhere = path.parent.parent / f"{NONCE}-elsewhere.jsonl"
    elsewhere.write_text('{"role":"user","content":"planted"}\n')
    path.symlink_to(elsewhere)


PLANTS: dict[str, Callable[[Path], None]] = {"fifo": _fifo, "socket": _socket, "link": _link}


def _archive_with_a_planted_second_transcript(root: Path, plant: str) -> Archive:
    archive = Archive(FilesystemArchiveStore(root, fsync=False), redactor=Redactor(enabled=False))
    archive.archive_transcript("s", [Message("user", f"{NONCE} one")])
    archive.archive_transcript("s", [Message("user", f"{NONCE} one"), Message("user", f"{NONCE} two")])
    target = root / archive_key("s") / SECOND
    assert target.is_file()
    target.unlink()
    PLANTS[plant](target)
    return archive


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and Unix sockets")
@pytest.mark.parametrize("plant", list(PLANTS))
def test_a_planted_transcript_is_listed_and_reading_it_is_refused_by_name(tmp_path: Path, plant: str) -> None:
    archive = _archive_with_a_planted_second_transcript(tmp_path / "a", plant)
    assert archive.transcript_numbers("s") == [1, 2]
    with pytest.raises(CorruptRecord, match=SECOND):
        archive.transcripts("s")
    with pytest.raises(CorruptRecord, match=SECOND):
        archive.restore_history("s")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and Unix sockets")
@pytest.mark.parametrize("plant", list(PLANTS))
def test_a_tolerant_reader_is_told_and_gets_the_rest(tmp_path: Path, plant: str) -> None:
    archive = _archive_with_a_planted_second_transcript(tmp_path / "a", plant)
    told: list[str] = []
    found = archive.transcripts("s", on_bad_line=told.append)
    assert [(n, [m.text for m in ms]) for n, ms in found] == [(1, [f"{NONCE} one"]), (2, [])]
    assert len(told) == 1 and SECOND in told[0]
    archive.archive_transcript("s", [Message("user", f"{NONCE} three")])
    assert archive.transcript_numbers("s") == [1, 2, 3]
