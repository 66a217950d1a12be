"""Helpers for tests that plant special files where contextfold reads (a socket, a FIFO)."""
from __future__ import annotations

import contextlib
import socket
from pathlib import Path


def plant_unix_socket(path: Path) -> None:
    """Leave a Unix socket file at ``path``.

    Bound by its name from its folder: a socket's address holds at most ~107 bytes, fewer than a pytest-xdist
    worker's tmp_path and a file name (CI failed with "AF_UNIX path too long").
    """
    with contextlib.chdir(path.parent), socket.socket(socket.AF_UNIX) as sock:
        sock.bind(path.name)
