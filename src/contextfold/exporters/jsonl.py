"""Events appended to a JSON Lines file, one event per line.

Each batch goes out in one ``write`` on a descriptor opened with ``O_APPEND``: the kernel positions every such
write at the current end of file, so several processes (a fleet of workers on one host) can share a file
without interleaving inside a line.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from .._files import append_bytes, private_dir, rotate
from .base import BaseExporter, Batch

__all__ = ["JSONL_KEEP", "JSONL_MAX_BYTES", "JsonlExporter"]

# The file is rotated past this size, keeping this many older files (events.jsonl.1, .2): bounded on disk however
# long the agent runs, and big enough that a day of events usually fits in the live file.
JSONL_MAX_BYTES = 16 * 1024 * 1024
JSONL_KEEP = 2

class JsonlExporter(BaseExporter):
    """Appends events to ``path`` (parent folders are created 0700, the file 0600), optionally fsync'ing.

    Past ``max_bytes`` the file is rotated (``path.1`` … ``path.<keep>``; the oldest is dropped).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False, max_bytes: int = JSONL_MAX_BYTES,
                 keep: int = JSONL_KEEP) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self.max_bytes = max_bytes
        self.keep = keep
        self._lock = threading.Lock()

    def export(self, batch: Batch) -> None:
        """Append one line per event."""
        if not batch:
            return
        payload = "".join(
            json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str) + "\n" for event in batch
        ).encode("utf-8")
        with self._lock:
            private_dir(self.path.parent)
            rotate(self.path, max_bytes=self.max_bytes, keep=self.keep)
            append_bytes(self.path, payload, fsync=self._fsync)
