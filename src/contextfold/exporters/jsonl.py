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

from .._files import append_bytes
from .base import BaseExporter, Batch

__all__ = ["JsonlExporter"]



class JsonlExporter(BaseExporter):
    """Appends events to ``path`` (parent folders are created), optionally fsync'ing after each batch."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._lock = threading.Lock()

    def export(self, batch: Batch) -> None:
        """Append one line per event."""
        if not batch:
            return
        payload = "".join(
            json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str) + "\n" for event in batch
        ).encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_bytes(self.path, payload, fsync=self._fsync)
