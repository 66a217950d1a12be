"""Two workers sharing one secret memory store keep every secret either of them saved.

Found by the fourteenth session: a worker whose next record number is stale (another worker's fold or merge passed
over it since) appended its record where no load reads any more, and two workers appending under one number at
once kept only the last one's record: a secret one worker learned was silently forgotten by the fleet. Now a record
is written only where no key is (``BlobStore.put_new``), and a fold or merge first notes through which record it
passed (a marker record); a worker whose new record is at or below that reads the store again and appends after it.
The interleavings are made deterministic by a store that runs the other worker's save at a chosen write.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from secret_memory_workers import STORE_KINDS, HookedStore, Secrets, opened_store

from contextfold.cache.blobs import BlobStore
from contextfold.redact import SecretMemory
from contextfold.redact import memory as memory_module
from contextfold.redact._memory_records import FAN_IN
from contextfold.redact.memory import MEMORY_KEY_PREFIX

NONCE = "rt15wkr"
_SEGMENT = re.escape(MEMORY_KEY_PREFIX) + r"[0-9a-f]+\.[0-9]+$"  # (a record, not a merged run)
SECRETS = Secrets(NONCE)
_secret = SECRETS.value
_saved = SECRETS.saved


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    yield from opened_store(request.param, tmp_path)


def test_a_late_worker_s_record_after_another_s_fold_is_read(store: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 97f801b: the late worker appended record 2, which the other's fold (through 4) had passed over,
    # then folded what it knew (through 2) and deleted the other's base: the other's secrets 2..4 were gone.
    monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", 1)  # (a fold at every other save)
    session = f"{NONCE}-fold"
    first, late = SecretMemory(store, session), SecretMemory(store, session)
    _saved(first, "a", 2)  # a base, and record 1
    assert late.values()  # (the late worker loads now: its next record is 2)
    _saved(first, "a", 3, start=2)  # records 2, 3, 4, folded into the base
    _saved(late, "late", 1)
    expected = {_secret("a", i) for i in range(5)} | {_secret("late", 0)}
    assert expected <= set(SecretMemory(store, session).values())
    _saved(first, "a", 1, start=5)  # (the first worker, going on, reads the late one's record and keeps it)
    _saved(late, "late", 1, start=1)
    expected |= {_secret("a", 5), _secret("late", 1)}
    assert expected <= set(SecretMemory(store, session).values())


def test_a_late_worker_s_record_after_another_s_merge_is_read(store: BlobStore) -> None:
    # Fails on 97f801b: the late worker read record 3 absent, the other worker wrote 3..8 and merged 1..8 into a
    # run (deleting record 3), then the late worker wrote record 3: a load reads the run from 1 on and skips it.
    session = f"{NONCE}-merge"
    first = SecretMemory(store, session)
    _saved(first, "a", 3)  # a base, records 1, 2
    hooked = HookedStore(store)
    late = SecretMemory(hooked, session)
    assert late.values()
    # (records 3..8, merged into a run)
    hooked.hook = ("put", _SEGMENT, lambda: _saved(first, "a", FAN_IN - 2, start=3))
    _saved(late, "late", 1)
    values = SecretMemory(store, session).values()
    assert _secret("late", 0) in values
    assert all(_secret("a", i) in values for i in range(FAN_IN + 1))


def test_a_late_fold_first_reads_what_another_worker_folded_meanwhile(
        store: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # The late worker appended record 3 and found it read; before its fold, the other worker read it, appended
    # record 4 and folded through 4 into the other base slot, deleting records 3 and 4. The late fold (through 3,
    # into that same slot) would have replaced that base and lost record 4: it reads the store again first.
    monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", 1)
    session = f"{NONCE}-folds"
    first = SecretMemory(store, session)
    _saved(first, "a", 3)  # a base, records 1 and 2, folded into the base's other slot
    hooked = HookedStore(store)
    late = SecretMemory(hooked, session)
    assert late.values()
    # (after the late record's check, before its fold)
    hooked.hook_after = ("get", r"\.p$", lambda: _saved(first, "a", 1, start=3))
    late.learn(_secret("late", 0) * 20, "token")  # (its record outweighs the base: it folds)
    assert late.save()
    values = SecretMemory(store, session).values()
    assert _secret("late", 0) * 20 in values
    assert all(_secret("a", i) in values for i in range(4)), sorted(values)


def test_two_workers_appending_one_record_number_both_keep_theirs(store: BlobStore) -> None:
    # Fails on 97f801b: both found record 2 absent; the late worker's put replaced the other's record 2, and its
    # check (reading back its own bytes) passed: the other worker's secret was gone.
    session = f"{NONCE}-same"
    first = SecretMemory(store, session)
    _saved(first, "a", 2)  # a base, record 1
    hooked = HookedStore(store)
    late = SecretMemory(hooked, session)
    assert late.values()
    hooked.hook = ("put", _SEGMENT, lambda: _saved(first, "a", 1, start=2))  # the first worker's record 2
    _saved(late, "late", 1)
    values = SecretMemory(store, session).values()
    assert _secret("late", 0) in values and _secret("a", 2) in values


@pytest.mark.redis
def test_over_redis_a_late_worker_s_record_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    from contextfold.stores.redis_blob import RedisBlobStore
    from contextfold.testing.services import RedisServer

    monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", 1)
    with RedisServer(tmp_path) as server:
        store = RedisBlobStore(server.url)
        session = f"{NONCE}-redis"
        first, late = SecretMemory(store, session), SecretMemory(store, session)
        _saved(first, "a", 2)
        assert late.values()
        _saved(first, "a", 3, start=2)  # folded past the late worker's next record
        hooked = HookedStore(store)
        other = SecretMemory(hooked, session)
        assert other.values()
        hooked.hook = ("put", _SEGMENT, lambda: _saved(late, "late", 1))  # both append under one number
        _saved(other, "other", 1)
        values = SecretMemory(RedisBlobStore(server.url), session).values()
        assert _secret("late", 0) in values and _secret("other", 0) in values
        assert all(_secret("a", i) in values for i in range(5))
        store.close()


def test_put_new_writes_only_where_no_key_is(store: BlobStore) -> None:
    assert store.put_new(f"{NONCE}-k", b"first")
    assert not store.put_new(f"{NONCE}-k", b"second")
    assert store.get(f"{NONCE}-k") == b"first"
    store.delete(f"{NONCE}-k")
    assert store.put_new(f"{NONCE}-k", b"third") and store.get(f"{NONCE}-k") == b"third"
