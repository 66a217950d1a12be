"""A session's secret memory writes a small multiple of what it holds, however many small saves it makes.

Found by the fourteenth session: the appended records were folded into the base every 32 records, and each fold
rewrote the whole base, so many small saves wrote a multiple of the memory that grew with it (bench/
bench_secret_memory.py: 10,000 secrets saved every 10 wrote 4.4 MB for a memory of 0.31 MB; 6,000 saved every 2,
~48x). Now records are merged by levels (``FAN_IN`` of a level make one of the next) and folded into the base once
what follows it outweighs it: each byte is written once a level and bases at most twice. A merge or a fold cut at
any byte, or a process killed between its write and its deletes, loses nothing saved before.
"""

from __future__ import annotations

import pytest

from contextfold.errors import CorruptRecord
from contextfold.redact import SecretMemory
from contextfold.redact._memory_records import FAN_IN, MAX_LEVEL, encode_record, run_key
from contextfold.redact.memory import MEMORY_KEY_PREFIX, memory_key
from contextfold.stores.memory import MemoryBlobStore

NONCE = "rt14lvl"


class CountingStore(MemoryBlobStore):
    """A memory store that notes every put (key, bytes) and delete."""

    def __init__(self) -> None:
        super().__init__()
        self.puts: list[tuple[str, bytes]] = []
        self.deletes: list[str] = []

    def put(self, key: str, data: bytes) -> None:
        self.puts.append((key, bytes(data)))
        super().put(key, data)

    def delete(self, key: str) -> bool:
        self.deletes.append(key)
        return bool(super().delete(key))


def _secret(i: int) -> str:
    return f"{NONCE}Kx{i:05d}q9Zm{i * 7919 % 100_000:05d}"


def _memory_keys(store: MemoryBlobStore) -> list[str]:
    """The keys of the memories a load reads (not the note of what folds and merges passed over)."""
    return sorted(e.key for e in store.entries() if e.key.startswith(MEMORY_KEY_PREFIX) and not e.key.endswith(".p"))


def _state(store: MemoryBlobStore) -> dict[str, bytes]:
    return {key: store.get(key) for key in _memory_keys(store)}


def _restore(store: MemoryBlobStore, state: dict[str, bytes]) -> None:
    for key in _memory_keys(store):
        store.delete(key)
    for key, data in state.items():
        store.put(key, data)


def test_many_small_saves_write_a_small_multiple_of_the_memory() -> None:
    # Fails on 6775dcc: 4,000 secrets saved every 2 wrote ~20x the memory there (every 32 records, the whole base).
    store = CountingStore()
    memory = SecretMemory(store, f"{NONCE}-bytes")
    for i in range(4_000):
        memory.learn(_secret(i), "password")
        if i % 2 == 1:
            assert memory.save()
    written = sum(len(data) for _, data in store.puts)
    held = len(encode_record(memory.values().items(), 0.0, through=0))  # (the memory as one record)
    # A record, a merge a level, the bases twice over (and each record's header): at most 6x.
    assert written <= (1 + MAX_LEVEL + 2) * held, f"{written:,} bytes written for a memory of {held:,}"
    # What a load reads is bounded: a base, and fewer than FAN_IN of each level after it.
    assert len(_memory_keys(store)) <= 1 + (FAN_IN - 1) * (MAX_LEVEL + 1)
    assert sum(len(store.get(k)) for k in _memory_keys(store)) <= 2 * held  # (one base, not two)
    assert SecretMemory(store, f"{NONCE}-bytes").values() == memory.values()


def _to_the_brink(session: str) -> tuple[CountingStore, SecretMemory, dict[str, str], dict[str, bytes]]:
    """A memory whose next save completes a group of FAN_IN records (its merge into a run of level 1)."""
    store = CountingStore()
    memory = SecretMemory(store, session)
    memory.learn(_secret(0) * 40, "password")  # (a large base: no fold into it during the test)
    assert memory.save()
    for i in range(1, FAN_IN):
        memory.learn(_secret(i), "password")
        assert memory.save()
    assert len(_memory_keys(store)) == FAN_IN  # (the base and FAN_IN - 1 records)
    return store, memory, SecretMemory(store, session).values(), _state(store)


def test_a_merge_cut_at_any_byte_or_killed_before_its_deletes_loses_nothing() -> None:
    session = f"{NONCE}-merge"
    store, memory, before, snapshot = _to_the_brink(session)
    store.puts.clear()
    store.deletes.clear()
    memory.learn(_secret(9_000), "token")
    assert memory.save()  # (appends its record, merges the FAN_IN records into a run, deletes them)
    everything = memory.values()
    (record_key, record), (merged_key, merged) = [(k, d) for k, d in store.puts if not k.endswith(".p")]
    merged_records = list(store.deletes)
    assert len(merged_records) == FAN_IN and merged_key not in merged_records
    assert merged_key == run_key(memory_key(session), 1, 1)
    assert _memory_keys(store) == sorted([memory_key(session), merged_key])
    for earlier, (key, data) in ((snapshot, (record_key, record)),
                                 ({**snapshot, record_key: record}, (merged_key, merged))):
        for cut in range(len(data) + 1):
            _restore(store, {**earlier, key: data[:cut]})
            loaded = SecretMemory(store, session).values()
            expected = everything if key == merged_key or cut == len(data) else before
            assert loaded == expected, f"{key} cut at byte {cut} of {len(data)}"
    # Killed between the merged run's write and its deletes: the records it merges not deleted yet are left.
    for left in range(FAN_IN + 1):
        _restore(store, {**snapshot, record_key: record, merged_key: merged,
                         **{k: (snapshot | {record_key: record})[k] for k in merged_records[left:]}})
        assert SecretMemory(store, session).values() == everything


def test_runs_merge_level_by_level_and_a_load_reads_them() -> None:
    store = CountingStore()
    session = f"{NONCE}-levels"
    memory = SecretMemory(store, session)
    memory.learn(_secret(0) * 400, "password")  # (a base large enough that FAN_IN ** 2 records stay out of it)
    assert memory.save()
    for i in range(1, FAN_IN ** 2 + 3):
        memory.learn(_secret(i), "password")
        assert memory.save()
    key = memory_key(session)
    assert _memory_keys(store) == sorted([key, run_key(key, 1, 2), *(f"{key}.{n}" for n in (65, 66))])
    assert SecretMemory(store, session).values() == memory.values()


def test_a_fold_cut_at_any_byte_or_killed_before_its_deletes_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("contextfold.redact.memory._FOLD_MIN_BYTES", 0)  # (a fold of a small memory: a short test)
    store = CountingStore()
    session = f"{NONCE}-fold"
    memory = SecretMemory(store, session)
    memory.learn(_secret(0) * 8, "password")
    assert memory.save()
    memory.learn(_secret(1), "password")
    assert memory.save()  # (a record, lighter than the base)
    before = SecretMemory(store, session).values()
    snapshot = _state(store)
    store.puts.clear()
    store.deletes.clear()
    memory.learn(_secret(7_000) * 12, "token")  # (what follows the base now outweighs it)
    assert memory.save()
    everything = memory.values()
    (record_key, record), (base_key, base) = [(k, d) for k, d in store.puts if not k.endswith(".p")]
    fold_deletes = list(store.deletes)  # (the records it holds, then the previous base)
    assert fold_deletes[-1] == memory_key(session)
    assert base_key == memory_key(session) + ".b"
    assert _memory_keys(store) == [base_key]  # (the records it holds and the previous base deleted)
    for cut in range(len(record)):  # (killed while it puts its record)
        _restore(store, {**snapshot, record_key: record[:cut]})
        assert SecretMemory(store, session).values() == before, f"the record cut at byte {cut} of {len(record)}"
    for cut in range(len(base) + 1):
        _restore(store, {**snapshot, record_key: record, base_key: base[:cut]})
        assert SecretMemory(store, session).values() == everything, f"the base cut at byte {cut} of {len(base)}"
    for left in range(len(fold_deletes) + 1):  # (killed among its deletes)
        full = {**snapshot, record_key: record}
        _restore(store, {base_key: base, **{k: full[k] for k in fold_deletes[left:]}})
        assert SecretMemory(store, session).values() == everything


def test_a_corrupt_run_is_refused_and_so_is_a_cut_one_whose_records_are_gone() -> None:
    session = f"{NONCE}-corrupt"
    store, memory, _, _ = _to_the_brink(session)
    memory.learn(_secret(9_001), "token")
    assert memory.save()
    merged_key = run_key(memory_key(session), 1, 1)
    merged = store.get(merged_key)
    flipped = bytearray(merged)
    flipped[-3] ^= 0x01
    store.put(merged_key, bytes(flipped))
    with pytest.raises(CorruptRecord, match=merged_key):
        SecretMemory(store, session).values()
    store.put(merged_key, merged[:-7])  # (cut short, and the records it merged were deleted)
    with pytest.raises(CorruptRecord, match="records it merges are gone"):
        SecretMemory(store, session).values()
