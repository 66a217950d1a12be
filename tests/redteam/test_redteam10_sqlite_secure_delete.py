"""What retention deletes from the local stores leaves the file, on every SQLite build (red team, tenth session).

The local tool output store and session store are SQLite files. A deleted row's bytes stay in the file's free pages
unless SQLite's ``secure_delete`` is on, and its default is the build's: Debian's and Ubuntu's SQLite turn it on,
SQLite's own default (the library bundled with Python on Windows and with many other builds) is off. There, a tool
output deleted by retention (``contextfold gc``, a manager's own retention), a session's secret memory deleted with
it, or a session the proxy prunes stayed readable in ``.contextfold/*.sqlite3`` with a plain ``grep``, secrets
included. The stores now turn ``secure_delete`` on themselves.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextfold.stores import LocalBlobStore

_connect = sqlite3.connect


@pytest.fixture(name="sqlite_default_off")
def sqlite_default_off_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """SQLite as built without SQLITE_SECURE_DELETE: every new connection starts with secure_delete off."""
    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = _connect(*args, **kwargs)
        connection.execute("PRAGMA secure_delete=OFF")
        return connection

    monkeypatch.setattr(sqlite3, "connect", connect)
    yield


@pytest.mark.usefixtures("sqlite_default_off")
def test_a_deleted_tool_output_is_not_left_in_the_file(tmp_path: Path) -> None:
    secret = f"password: Zq7TnV4p-{uuid.uuid4().hex}"
    store = LocalBlobStore(tmp_path)
    store.put("tout_kept_before", b"x" * 20_000)
    store.put("tout_secret", (secret + "\n").encode() * 50)
    store.put("tout_kept_after", b"y" * 20_000)
    assert store.delete("tout_secret")
    path = store.path
    store.close()  # (the last connection checkpoints the write-ahead log into the file and removes it)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(path.name)
                 and secret.encode() in p.read_bytes()]
    assert leftovers == []
