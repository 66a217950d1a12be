"""An archive store whose answer to one write is lost after the write landed (a reset connection, a proxy's 5xx).

It wraps a real store (a folder, moto_server's S3, redis-server): the write is carried out by that store, then
:class:`~contextfold.errors.StoreError` is raised as the client of a lost answer sees it. Only the answer is
simulated; what is stored is the real store's.
"""

from __future__ import annotations

from collections.abc import Iterable

from contextfold.archive import ArchiveStore
from contextfold.errors import StoreError


class LosesAnswers:
    """``inner`` with the answers of the next ``lose`` transcript writes lost (after they landed)."""

    def __init__(self, inner: ArchiveStore) -> None:
        self.inner = inner
        self.lose = 0
        self.lost: list[str] = []

    def _landed(self, session_id: str, name: str) -> None:
        if self.lose and name.startswith("transcript-"):
            self.lose -= 1
            self.lost.append(name)
            raise StoreError(f"archive {session_id}/{name}: connection reset before the answer")

    def write(self, session_id: str, name: str, data: bytes, *, exclusive: bool = False) -> None:
        self.inner.write(session_id, name, data, exclusive=exclusive)
        self._landed(session_id, name)

    def write_chunks(self, session_id: str, name: str, chunks: Iterable[bytes], *, exclusive: bool = False) -> int:
        streams = getattr(self.inner, "write_chunks", None)
        if callable(streams):
            size = int(streams(session_id, name, chunks, exclusive=exclusive))
        else:
            data = b"".join(chunks)
            self.inner.write(session_id, name, data, exclusive=exclusive)
            size = len(data)
        self._landed(session_id, name)
        return size

    def read(self, session_id: str, name: str) -> bytes | None:
        return self.inner.read(session_id, name)

    def append(self, session_id: str, name: str, data: bytes) -> None:
        self.inner.append(session_id, name, data)

    def names(self, session_id: str) -> list[str]:
        return self.inner.names(session_id)

    def sessions(self) -> list[str]:
        return self.inner.sessions()

    def close(self) -> None:
        self.inner.close()
