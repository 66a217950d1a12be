"""The line index of a cached tool output, and streaming its lines one chunk at a time.

A stored output over :data:`INDEX_CHUNK_BYTES` gets a small index next to it (key ``<ref>.lines``) holding the
newline count before each chunk, so that finding line *n* of a 100 MB output costs a lookup and a chunk read.
Split from :mod:`contextfold.cache.retrieval`, which reads and greps through these helpers and re-exports them.
"""

from __future__ import annotations

import bisect
import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .blobs import BlobStore

__all__ = [
    "INDEX_CHUNK_BYTES",
    "STREAM_CHUNK_BYTES",
    "build_line_index",
    "count_lines",
    "index_key",
    "index_owner",
    "line_start",
    "stored_line_count",
    "stream_lines",
]

# Bytes read from the store at a time while streaming lines.
STREAM_CHUNK_BYTES = 64 * 1024
# Outputs up to this size are scanned directly; larger ones get a line index (one uint64 per chunk of this size,
# holding the number of newlines before the chunk: 100 MB needs a 13 KB index).
INDEX_CHUNK_BYTES = 64 * 1024

_INDEX_SUFFIX = ".lines"
_INDEX_MAGIC = b"CFLX"
_INDEX_HEADER = struct.Struct("<4sIQQI")  # magic, version, byte size, line count, chunk bytes
_INDEX_VERSION = 1


# -- the line index -----------------------------------------------------------------------------------------------


def count_lines(data: bytes) -> int:
    """Lines in ``data``: newlines, plus one for a last line without a newline."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def index_key(ref_id: str) -> str:
    """The store key of a ref's line index."""
    return ref_id + _INDEX_SUFFIX


def index_owner(key: str) -> str | None:
    """The ref id a line-index key belongs to, or None for other keys."""
    return key[: -len(_INDEX_SUFFIX)] if key.endswith(_INDEX_SUFFIX) else None


def build_line_index(data: bytes, line_count: int) -> bytes | None:
    """The line index of ``data``, or None when it is small enough to scan whole."""
    if len(data) <= INDEX_CHUNK_BYTES:
        return None
    counts = array("Q")
    running = 0
    for start in range(0, len(data), INDEX_CHUNK_BYTES):
        counts.append(running)
        running += data.count(b"\n", start, start + INDEX_CHUNK_BYTES)
    if counts.itemsize != 8:  # pragma: no cover - "Q" is 8 bytes on every supported platform
        raise RuntimeError("array('Q') is not 64-bit on this platform")
    header = _INDEX_HEADER.pack(_INDEX_MAGIC, _INDEX_VERSION, len(data), line_count, INDEX_CHUNK_BYTES)
    return header + counts.tobytes()


@dataclass(frozen=True, slots=True)
class _LineIndex:
    size: int
    line_count: int
    chunk: int
    counts: array[int]


def _load_index(store: BlobStore, ref_id: str, size: int) -> _LineIndex | None:
    key = index_key(ref_id)
    blob_size = store.size(key)
    if blob_size is None:
        return None
    raw = store.read_range(key, 0, blob_size)
    magic, version, nbytes, lines, chunk = _INDEX_HEADER.unpack_from(raw)
    if magic != _INDEX_MAGIC or version != _INDEX_VERSION or nbytes != size:
        return None
    counts = array("Q")
    counts.frombytes(raw[_INDEX_HEADER.size :])
    return _LineIndex(nbytes, lines, chunk, counts)


def stored_line_count(store: BlobStore, ref_id: str, size: int) -> int:
    """The line count of a stored output, from its index or, for a small output, by counting."""
    index = _load_index(store, ref_id, size)
    if index is not None:
        return index.line_count
    # No index: small enough to count in one go, or an index lost to a crash (count in chunks then).
    return sum(1 for _ in stream_lines(store, ref_id, 0, size, keep=0))


def line_start(store: BlobStore, ref_id: str, size: int, line: int) -> int:
    """Byte offset where 1-based ``line`` starts (``size`` when past the end)."""
    newlines = line - 1  # newlines that precede the line
    if newlines <= 0:
        return 0
    index = _load_index(store, ref_id, size)
    start, seen = 0, 0
    if index is not None:
        # The last chunk that starts with fewer newlines before it than we need holds the one we look for.
        i = bisect.bisect_left(index.counts, newlines) - 1
        start, seen = i * index.chunk, index.counts[i]
    pos = start
    while pos < size:
        chunk = store.read_range(ref_id, pos, STREAM_CHUNK_BYTES)
        if not chunk:
            break
        found = chunk.count(b"\n")
        if seen + found >= newlines:
            at = -1
            for _ in range(newlines - seen):
                at = chunk.index(b"\n", at + 1)
            return pos + at + 1
        seen += found
        pos += len(chunk)
    return size


def stream_lines(store: BlobStore, key: str, start: int, size: int, *, keep: int) -> Iterator[tuple[bytes, int]]:
    """Yield ``(first keep bytes, full length)`` of each line from byte ``start``, one chunk in memory at a time."""
    buf = bytearray()
    length = 0
    pos = start
    while pos < size:
        chunk = store.read_range(key, pos, STREAM_CHUNK_BYTES)
        if not chunk:
            break
        pos += len(chunk)
        at = 0
        while True:
            nl = chunk.find(b"\n", at)
            end = len(chunk) if nl < 0 else nl
            room = keep - len(buf)
            if room > 0:
                buf += chunk[at : min(end, at + room)]
            length += end - at
            if nl < 0:
                break
            yield bytes(buf), length
            buf.clear()
            length = 0
            at = nl + 1
    if length:
        yield bytes(buf), length
