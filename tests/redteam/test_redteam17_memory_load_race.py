"""A thread reading a stored secret memory while another loads it waits for the load: it never reads it half-empty.

Found by the seventeenth red team (pre-existing): ``SecretMemory._load`` marked the memory loaded before it had
learned what the store holds (so that its own learning would not load again), and the readers look at that mark
without the lock. A resumed session's memory, loaded by the agent's first call, was read meanwhile by another
thread (the telemetry thread redacting an event, the read-ahead redacting an output) as holding nothing: a secret
the session had remembered went out bare in what that thread wrote, for as long as the store's read took (a Redis
round trip, an S3 GET).
"""

from __future__ import annotations

import threading

from contextfold.redact import Redactor, SecretMemory
from contextfold.redact.memory import MEMORY_KEY_PREFIX
from contextfold.stores.memory import MemoryBlobStore

NONCE = "rt17load"
SECRET = f"{NONCE}Zq8Wm3Kx7Lp2Vn"
# How long the load, held inside the store's read, gives the other thread to read past it. The fixed memory makes
# that thread wait for the load whatever this is; only a wrong pass (a slow machine on the unfixed code) depends on it.
_READER_WAIT_S = 0.5


class HeldStore(MemoryBlobStore):
    """A store whose first read of the memory runs ``during_read`` before it answers (the load is then under way)."""

    def __init__(self, inner: MemoryBlobStore) -> None:
        super().__init__()
        self.inner = inner
        self.during_read: object = None

    def get(self, key: str) -> bytes:
        hook = self.during_read
        if callable(hook) and key.startswith(MEMORY_KEY_PREFIX):
            self.during_read = None
            hook()
        return self.inner.get(key)

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)

    def put_new(self, key: str, data: bytes) -> bool:
        return self.inner.put_new(key, data)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def entries(self):  # type: ignore[no-untyped-def]
        return self.inner.entries()


def test_a_reader_waits_for_the_load_of_a_stored_memory() -> None:
    shared = MemoryBlobStore()
    earlier = SecretMemory(shared, session_id=NONCE)
    earlier.learn(SECRET, "password")
    assert earlier.save()

    held = HeldStore(shared)
    memory = SecretMemory(held, session_id=NONCE)
    redactor = Redactor(memory=memory)
    text = f"the value in use is {SECRET} today"
    seen: dict[str, object] = {}

    def read_elsewhere() -> None:
        seen["redacted"] = redactor.redact_text(text)
        seen["spans"] = memory.spans(text)

    def during_read() -> None:
        reader = threading.Thread(target=read_elsewhere)
        reader.start()
        reader.join(_READER_WAIT_S)
        seen["reader"] = reader

    held.during_read = during_read
    loader = threading.Thread(target=lambda: memory.generation)
    loader.start()
    loader.join()
    reader = seen["reader"]
    assert isinstance(reader, threading.Thread)
    reader.join()
    assert seen["spans"], "read the memory as empty while it was being loaded"
    assert SECRET not in str(seen["redacted"])
    assert memory.generation >= 1
