"""The in-memory archive store holds a repeated transcript's common line heads once (issue 22).

A 100,000-message history of the shared sessions repeated archived ~255 MB into ``MemoryArchiveStore`` (520 MB
peak with ``archive="memory"``): the copies' lines differ only in the message's id. Whatever the pieces hold (lines
cut anywhere, ids anywhere, no final newline), the bytes read back are the bytes written.
"""

from __future__ import annotations

import gc
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive._archive import transcript_name
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.serialize import dumps_messages

_line = st.one_of(
    st.binary(max_size=40),
    st.builds(lambda head, tail: head + b'"id":' + tail, st.sampled_from([b"x" * 300, b"y" * 256, b"z" * 255, b""]),
              st.binary(max_size=20)),
    st.just(b"h" * 400 + b'"id":"a"' + b'"id":"b"'),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_line, max_size=12), st.lists(st.integers(1, 700), max_size=8), st.booleans())
def test_what_is_read_back_is_what_was_written_in_any_pieces(lines: list[bytes], cuts: list[int],
                                                             final_newline: bool) -> None:
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    pieces, at = [], 0
    for cut in cuts:
        pieces.append(data[at:at + cut])
        at += cut
    pieces.append(data[at:])
    store = MemoryArchiveStore()
    assert store.write_chunks("s", "t.jsonl", iter(pieces)) == len(data)
    assert store.read("s", "t.jsonl") == data
    store.append("s", "t.jsonl", b"more\n")
    assert store.read("s", "t.jsonl") == data + b"more\n"


def test_a_repeated_transcript_is_held_at_a_fraction_of_its_size() -> None:
    originals = [Message("tool" if i % 2 else "assistant", f"{i} " + "output line of a tool\n" * 100,
                         tool_call_id="c1" if i % 2 else None, meta={"source": {"agent": "main"}, "id": f"s:{i}"})
                 for i in range(20)]
    history = [m.with_meta(id=f"s:{n}:{i}") for n in range(40) for i, m in enumerate(originals)]
    archive = Archive(MemoryArchiveStore(), redactor=Redactor(enabled=False))
    size = len(dumps_messages(history).encode())
    gc.collect()
    tracemalloc.start()
    try:
        n = archive.archive_transcript("s1", history, redacted=True)
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 0.2 * size, f"holds {held / size:.2f}x the transcript"  # (it held it all: 1.0x)
    assert archive.store.read("s1", transcript_name(n)) == dumps_messages(history).encode()
