"""A transcript goes to a store in pieces as it is encoded, byte for byte what the whole would be (issue 22).

A compaction of 100,000 messages archives ~260 MB of JSON Lines: the lines' bytes and their join were held at once
and the in-memory store copied the join again (958 MB peak for a 190 MB history). Repeated texts (the same output
object in many messages) are encoded once per transcript.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import serialize
from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive._archive import transcript_name
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.serialize import dumps_messages, encode_message_chunks, loads_messages
from contextfold.stores.archive_fs import FilesystemArchiveStore

_text = st.text(alphabet=st.characters(codec=None), max_size=40) | st.sampled_from(
    ['quote " and \\ back', "tab\tnew\nline\x00nul", "lone \ud800 surrogate", "ünïcödé ✓"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]), _text, _text), min_size=1, max_size=4),
       st.lists(st.integers(0, 3), max_size=12))
def test_pieces_of_a_history_with_repeats_are_its_json_lines(
        originals: list[tuple[str, str, str]], order: list[int]) -> None:
    # Copies share their text and meta value objects, as a repeated history's do; every text counts as long and
    # the pieces are small, so the remembered JSON and the piece boundaries are both exercised.
    base = [Message(role, text, (ToolCall("c", "bash", arg),) if role == "assistant" else (),
                    meta={"id": f"m{i}", "source": {"k": [arg, 1]}, "raw": text})
            for i, (role, text, arg) in enumerate(originals)]
    history = [*base, *(base[i % len(base)].with_meta(id=f"copy{n}") for n, i in enumerate(order))]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(serialize, "_REPEAT_MIN_CHARS", 0)
        patch.setattr(serialize, "_CHUNK_CHARS", 64)
        patch.setattr(serialize, "_lines", type(serialize._lines)())  # (no line remembered from another example)
        pieces = list(encode_message_chunks(history))
    expected = "".join(serialize.json_text(serialize.message_to_dict(m), separators=(",", ":")) + "\n"
                       for m in history)
    assert b"".join(pieces) == expected.encode()
    assert all(piece.endswith(b"\n") for piece in pieces)  # whole lines in each
    assert loads_messages(dumps_messages(history)) == history


def _history(count: int, chars: int) -> list[Message]:
    return [Message("tool" if i % 2 else "user", f"{i:08d} " + "log line, no secret here\n" * (chars // 25),
                    tool_call_id="c1" if i % 2 else None, meta={"id": f"s:{i}"}) for i in range(count)]


@pytest.mark.parametrize("store", ["memory", "fs"])
def test_a_streamed_transcript_reads_back_byte_for_byte(store: str, tmp_path: Path) -> None:
    archive = Archive(MemoryArchiveStore() if store == "memory" else FilesystemArchiveStore(tmp_path, fsync=False),
                      redactor=Redactor())
    history = _history(120, 20_000)  # (2.4 MB: several pieces)
    n = archive.archive_transcript("s1", history)
    expected = dumps_messages(archive.redactor.redact_messages(history)).encode()
    assert archive.store.read("s1", transcript_name(n)) == expected
    with pytest.raises(FileExistsError):
        archive.store.write_chunks("s1", transcript_name(n), iter([b"x\n"]), exclusive=True)
    assert archive.archive_transcript("s1", history[:3]) == n + 1


def test_archiving_to_the_memory_store_holds_the_transcript_about_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the lines' bytes and their join, then the join and the store's copy of it (2.05x the transcript).
    monkeypatch.setattr(serialize, "_LINE_CACHE_ENTRIES", 16)  # (the lines a later transcript reuses: not measured)
    monkeypatch.setattr(serialize, "_CHUNK_CHARS", 1 << 16)  # (a piece is 1 MB: a fourth of this transcript)
    history = _history(1_000, 4_000)
    archive = Archive(MemoryArchiveStore(), redactor=Redactor(enabled=False))  # (redaction is not measured)
    size = len(dumps_messages(history).encode())
    tracemalloc.start()
    try:
        archive.archive_transcript("s1", history, redacted=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * size, f"peak {peak / size:.2f}x the transcript"
