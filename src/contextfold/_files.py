"""File writing shared by the JSONL exporter and the filesystem archive."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["append_bytes"]

# Readable by the user's tools, writable by the process owner: the usual mode of log and archive files.
FILE_MODE = 0o644


def append_bytes(path: Path, data: bytes, *, fsync: bool) -> None:
    """Append ``data`` to ``path`` (created if missing) with one ``O_APPEND`` write.

    O_APPEND makes each write land whole at the end, so concurrent appenders never interleave within a batch; the
    loop only covers a short write (disk nearly full, a signal), where finishing the batch beats losing its tail.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
