"""A session's secret memory: saves proportional to what is new, a save cut short never loses what was saved before.

Found by the thirteenth red team: ``SecretMemory.save`` rewrote the whole stored document (every value learned so
far) on each save, quadratic in bytes for a session that learns thousands of secrets (10,000 secrets saved every 10:
~250 MB written, bench/bench_secret_memory.py). A stored document cut short (a store that is not atomic, a copied
file cut) read as "nothing stored": every secret saved before was forgotten, and redacted nowhere any more; a corrupt
one the same, silently. Now a save appends a record of what is new (folded into the base now and then), the newest
record cut short is a save that never finished (left out, what came before loads), and any other record that is not
whole or not what contextfold writes is refused with an error naming the store's file and the record's key.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from contextfold.cache import Retention, ToolOutputCache
from contextfold.errors import CorruptRecord
from contextfold.redact import SecretMemory
from contextfold.redact._memory_records import passed_key
from contextfold.redact.memory import MEMORY_KEY_PREFIX, memory_key
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore

NONCE = "rt13mem"
DAY = 86_400.0


class CountingStore(MemoryBlobStore):
    """A memory store that notes every put (key, bytes)."""

    def __init__(self) -> None:
        super().__init__()
        self.puts: list[tuple[str, bytes]] = []

    def put(self, key: str, data: bytes) -> None:
        self.puts.append((key, bytes(data)))
        super().put(key, data)


def _secret(i: int) -> str:
    return f"{NONCE}Kx{i:05d}q9Zm{i * 7919 % 100_000:05d}"


def _memory_keys(store: MemoryBlobStore) -> list[str]:
    return [e.key for e in store.entries() if e.key.startswith(MEMORY_KEY_PREFIX)]


def test_saves_write_about_what_is_new_not_everything_again() -> None:
    store = CountingStore()
    memory = SecretMemory(store, f"{NONCE}-bytes")
    for i in range(2_000):
        memory.learn(_secret(i), "password")
        if i % 10 == 9:
            assert memory.save()
    written = sum(len(data) for _, data in store.puts)
    stored = sum(len(store.get(key)) for key in _memory_keys(store))
    # (Rewriting the whole memory on each of 200 saves wrote ~100x what it holds; a fold every 32 saves, ~4.5x.)
    assert written <= 6 * stored, f"{written:,} bytes written for a memory of {stored:,}"
    assert len(_memory_keys(store)) <= 33  # (a load reads a bounded number of keys)
    assert SecretMemory(store, f"{NONCE}-bytes").values() == memory.values()


def _saved_twice(session: str) -> tuple[CountingStore, dict[str, str], str, bytes]:
    """A store holding a memory saved several times: what the last save left before it, and its last write."""
    store = CountingStore()
    memory = SecretMemory(store, session)
    for i in range(40):
        memory.learn(_secret(i), "password")
        if i % 8 == 7:
            memory.save()
    before = SecretMemory(store, session).values()
    store.puts.clear()
    memory.learn(_secret(1_000), "api_key")
    memory.learn(_secret(1_001), "token")
    assert memory.save()
    (key, last), = {k: d for k, d in store.puts}.items()  # (one record written)
    return store, before, key, last


def test_a_save_cut_at_any_byte_never_loses_what_was_saved_before() -> None:
    store, before, key, last = _saved_twice(f"{NONCE}-cut")
    after = {**before, _secret(1_000): "api_key", _secret(1_001): "token"}
    for cut in range(len(last) + 1):
        store.put(key, last[:cut])
        loaded = SecretMemory(store, f"{NONCE}-cut").values()
        assert loaded == (after if cut == len(last) else before), f"cut at byte {cut} of {len(last)}"


def test_a_fold_cut_at_any_byte_never_loses_what_was_saved_before(monkeypatch: pytest.MonkeyPatch) -> None:
    # (A fold once what follows the base outweighs it, however small: a short test. The levels' merges and their
    # own cuts: test_redteam14_secret_memory_levels.py.)
    monkeypatch.setattr("contextfold.redact.memory._FOLD_MIN_BYTES", 0)
    store = CountingStore()
    session = f"{NONCE}-fold"
    memory = SecretMemory(store, session)
    for i in range(4):  # (the base, then records up to one short of a fold)
        memory.learn(_secret(i) * (20 if i == 0 else 1), "password")
        assert memory.save()
    before = SecretMemory(store, session).values()
    snapshot = {key: store.get(key) for key in _memory_keys(store)}
    store.puts.clear()
    memory.learn(_secret(5_000) * 40, "token")
    assert memory.save()  # (appends its record, then folds every record into the other base, then deletes them)
    everything = memory.values()
    (record_key, record), (fold_key, fold) = [(k, d) for k, d in store.puts if k != passed_key(memory_key(session))]
    assert fold_key == memory_key(session) + ".b"
    # A process killed while it puts the record, or the fold: the store as it was then, the put cut at every byte.
    for earlier, (key, data) in ((dict(snapshot), (record_key, record)),
                                 ({**snapshot, record_key: record}, (fold_key, fold))):
        for cut in range(len(data) + 1):
            for stale in _memory_keys(store):
                store.delete(stale)
            for held, value in {**earlier, key: data[:cut]}.items():
                store.put(held, value)
            loaded = SecretMemory(store, session).values()
            expected = everything if key == fold_key or cut == len(data) else before
            assert loaded == expected, f"{key} cut at byte {cut} of {len(data)}"


def test_the_next_save_writes_again_what_a_cut_save_lost() -> None:
    store, before, key, last = _saved_twice(f"{NONCE}-again")
    store.put(key, last[: len(last) // 2])
    memory = SecretMemory(store, f"{NONCE}-again")
    assert memory.values() == before
    memory.learn(_secret(2_000), "password")
    assert memory.save()
    assert SecretMemory(store, f"{NONCE}-again").values() == {**before, _secret(2_000): "password"}


def test_a_corrupt_record_is_refused_naming_the_file_and_the_record(tmp_path: Path) -> None:
    session = f"{NONCE}-corrupt"
    with LocalBlobStore(tmp_path) as store:
        memory = SecretMemory(store, session)
        memory.learn(_secret(1), "password")
        memory.save()
        memory.learn(_secret(2), "password")
        memory.save()  # (a record appended after the base)
        base = memory_key(session)
        raw = bytearray(store.get(base))
        raw[-3] ^= 0x01  # a flipped bit in the base's JSON: its checksum no longer matches
        store.put(base, bytes(raw))
        with pytest.raises(CorruptRecord) as refused:
            SecretMemory(store, session).values()
        assert str(tmp_path) in str(refused.value) and base in str(refused.value)
        # Refused at every use, not forgotten after the first (a memory that forgot would redact nothing).
        again = SecretMemory(store, session)
        for _ in range(2):
            with pytest.raises(CorruptRecord):
                again.values()


def test_a_record_cut_short_with_records_after_it_is_refused() -> None:
    store, _, key, last = _saved_twice(f"{NONCE}-middle")
    memory = SecretMemory(store, f"{NONCE}-middle")
    memory.learn(_secret(3_000), "password")
    assert memory.save()  # (another record after the one cut below)
    store.put(key, last[:-5])
    with pytest.raises(CorruptRecord, match="records follow it"):
        SecretMemory(store, f"{NONCE}-middle").values()


def test_two_workers_appending_keep_both_and_retention_deletes_every_record_together() -> None:
    store = MemoryBlobStore()
    one, two = SecretMemory(store, f"{NONCE}-two"), SecretMemory(store, f"{NONCE}-two")
    for i in range(6):
        (one if i % 2 else two).learn(_secret(i), "password")
        assert (one if i % 2 else two).save()
    assert SecretMemory(store, f"{NONCE}-two").values() == {_secret(i): "password" for i in range(6)}
    assert len(_memory_keys(store)) > 1  # (a base and records appended after it)
    cache = ToolOutputCache(store, retention=Retention(max_age_s=30 * DAY))
    cache.retain(now=time.time() + 29 * DAY)
    assert SecretMemory(store, f"{NONCE}-two").values() == {_secret(i): "password" for i in range(6)}
    cache.retain(now=time.time() + 31 * DAY)
    assert _memory_keys(store) == []
