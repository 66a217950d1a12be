"""Two workers folding (or merging, or loading) at once keep every secret either of them saved.

Found by the fourteenth session's review: a fold put its base over the other slot unconditionally, so a worker
whose fold began before another's whole save-and-fold replaced that base with an older one; the other worker's
value was gone, and every later record of it was invisible to loads (they stopped at the lost record). The next
save of the first worker then hit the note at every try and returned True with nothing stored. A load reading
while another worker merged could also stop short. The interleavings are made deterministic by a store that runs
the other worker's save just before a chosen operation on a chosen key (``secret_memory_workers.HookedStore``).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from secret_memory_workers import STORE_KINDS, HookedStore, Secrets, opened_store

from contextfold.cache.blobs import BlobStore
from contextfold.redact import SecretMemory
from contextfold.redact import memory as memory_module
from contextfold.redact._memory_records import FAN_IN, passed

NONCE = "rt16fld"


SECRETS = Secrets(NONCE)
_secret = SECRETS.value
_saved = SECRETS.saved


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    yield from opened_store(request.param, tmp_path)


def test_a_fold_overtaken_by_another_worker_s_fold_keeps_its_values(store: BlobStore) -> None:
    # Fails on 4ee3016: the late fold (through 3) put its base over the other worker's (through 4) in the same
    # slot; the other worker's value 3 was gone, its later records unread, and the late worker's next save
    # returned True with nothing stored.
    _check_overtaken_fold(store)


@pytest.mark.redis
def test_over_redis_a_fold_overtaken_keeps_its_values(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    from contextfold.stores.redis_blob import RedisBlobStore
    from contextfold.testing.services import RedisServer

    with RedisServer(tmp_path) as server:
        store = RedisBlobStore(server.url)
        _check_overtaken_fold(store)
        store.close()


def _check_overtaken_fold(store: BlobStore) -> None:
    session = f"{NONCE}-over"
    first = SecretMemory(store, session)
    _saved(first, "a", 3)  # a base, records 1 and 2
    hooked = HookedStore(store)
    late = SecretMemory(hooked, session)
    assert late.values()
    hooked.hook = ("put", r"\.b$", lambda: _saved(first, "a", 1, start=3))  # (a whole save and fold first)
    for i in range(1500):  # (its record outweighs the base: it folds)
        late.learn(_secret("late", i) * 3, "token")
    assert late.save() and late._through >= 3  # (it folded)
    _saved(first, "a", 3, start=4)
    late.learn(_secret("late2", 0), "token")
    assert late.save()
    values = SecretMemory(store, session).values()
    assert [i for i in range(7) if _secret("a", i) not in values] == []
    assert _secret("late", 1499) * 3 in values and _secret("late2", 0) in values


def test_a_load_during_another_worker_s_merge_reads_everything(store: BlobStore) -> None:
    # Fails on 4ee3016: the load found no run at record 1, then the other worker merged 1..8 into a run and
    # deleted record 1 before the load asked for it: the load stopped at the base.
    session = f"{NONCE}-load"
    first = SecretMemory(store, session)
    _saved(first, "a", FAN_IN)  # a base, records 1..7
    hooked = HookedStore(store)
    hooked.hook = ("get", r"\.[0-9a-f]{8,}\.1$", lambda: _saved(first, "a", 1, start=FAN_IN))  # record 8: 1..8 merged
    values = SecretMemory(hooked, session).values()
    assert [i for i in range(FAN_IN + 1) if _secret("a", i) not in values] == []


def test_a_merge_never_lowers_another_worker_s_note(store: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 4ee3016: the merging worker wrote the note it read when it appended (through 8), below the note the
    # other worker's fold had raised meanwhile (through 9): a late record at 9 would not have been caught.
    monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", 1 << 30)  # (no fold but the one the other worker runs)
    session = f"{NONCE}-note"
    first = SecretMemory(store, session)
    _saved(first, "a", FAN_IN)  # a base, records 1..7
    hooked = HookedStore(store)
    other = SecretMemory(hooked, session)
    assert other.values()

    def fold_first() -> None:
        _saved(other, "b", 0)
        other._next = FAN_IN + 2  # (as if it had read record 9 too: its fold passes through 9)
        other._fold()

    merging = SecretMemory(HookedStore(store), session)
    assert merging.values()
    assert isinstance(merging._store, HookedStore)
    merging._store.hook = ("put", r"\.1\.1$", fold_first)  # (just before its merged run is written)
    _saved(merging, "m", 1)  # record 8: 1..8 merged
    assert passed(store, merging._key or "") >= FAN_IN + 1


def test_a_save_that_stores_nothing_says_so(store: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 4ee3016: every append hit the note, then the unsaved values were cleared and save() said True.
    session = f"{NONCE}-none"
    first = SecretMemory(store, session)
    _saved(first, "a", 2)
    monkeypatch.setattr(SecretMemory, "_append", lambda self, n: None)
    first.learn(_secret("a", 9), "password")
    assert not first.save()
    monkeypatch.undo()
    assert first.save()
    assert _secret("a", 9) in SecretMemory(store, session).values()
