"""A transcript that fails mid-stream leaves nothing behind (review of the streamed archive, issue 22).

Streamed, the first pieces of a transcript reach the store before a later message fails to encode: the file
must not appear torn, no temporary file may stay, and the transcript number stays free for the next compaction.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold import serialize
from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive._archive import transcript_name
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.serialize import dumps_messages
from contextfold.stores.archive_fs import FilesystemArchiveStore


def _refuse(value: object) -> str:
    raise TypeError(f"cannot encode {type(value).__name__}")  # (a failure mid-stream, whatever the value)


@pytest.mark.parametrize("store", ["memory", "fs"])
def test_a_transcript_failing_mid_stream_leaves_no_file(store: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serialize, "_CHUNK_CHARS", 256)  # (many pieces: the failure comes after several)
    # (A value JSON has no form for is written as its text since red team 17, a set as a list: a failure to encode
    # one is made here. A message holds an object as its text since red team 19: a frozenset is what reaches it.)
    monkeypatch.setattr(serialize, "_unknown", _refuse)
    archive = Archive(MemoryArchiveStore() if store == "memory" else FilesystemArchiveStore(tmp_path, fsync=False),
                      redactor=Redactor(enabled=False))
    good = [Message("user", f"line {i} of the history " * 8, meta={"id": f"m{i}"}) for i in range(60)]
    broken = [*good[:40], Message("user", "bad", meta={"id": "x", "tags": frozenset({"a"})}), *good[40:]]
    with pytest.raises(TypeError):
        archive.archive_transcript("s1", broken, redacted=True)
    assert archive.store.read("s1", transcript_name(1)) is None
    if store == "fs":
        assert sorted(p.name for p in (tmp_path / "s1").iterdir()) == []  # no temporary file either
    assert archive.archive_transcript("s1", good, redacted=True) == 1
    assert archive.store.read("s1", transcript_name(1)) == dumps_messages(good).encode()
