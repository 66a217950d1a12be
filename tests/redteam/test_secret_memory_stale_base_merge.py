"""A worker whose base went stale (another worker folded meanwhile) must not make saved secrets unreadable.

Found by the sixteenth session's review (a stress of 2 to 4 threads, each its own SecretMemory of one session over one
store: a fresh load missed up to half the values saved, all still in the store). A worker appended records aligned
to the base it had read; another worker folded into a new base meanwhile; the first then merged its records into a
run aligned to the old base and deleted them. A load from the new base looked for a run or a record where one
aligned to it could start, found none, and read past everything up to the passed-over note. Now a merge whose note
another worker raised since this worker read the store is abandoned (the store read again), and a load past a gap
looks for the run covering it wherever one can start. The interleavings are forced by hooks on store operations.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from secret_memory_workers import STORE_KINDS, HookedStore, Secrets, opened_store

from contextfold.cache.blobs import BlobStore
from contextfold.redact import SecretMemory
from contextfold.redact import memory as memory_module
from contextfold.redact._memory_records import FAN_IN, base_key, encode_record, passed_key, run_key, segment_key
from contextfold.redact.memory import memory_key

NONCE = "rtstale7q"
SECRETS = Secrets(NONCE)
_NEVER = 10**12  # (a fold threshold no test reaches)


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    yield from opened_store(request.param, tmp_path)


class _Killed(Exception):
    """A worker's process dying at a chosen store operation."""


def test_a_merge_over_a_base_another_worker_replaced_keeps_every_value(store: BlobStore,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 6f2b645: the merging worker's records 1..8 became a run aligned to base 0 while the other worker's
    # base (through 2) was the current one; a load from it found nothing at 3 and lost values 3..8.
    _check_stale_merge(store, monkeypatch, "mem")


@pytest.mark.redis
def test_over_redis_a_merge_over_a_replaced_base_keeps_every_value(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    from contextfold.stores.redis_blob import RedisBlobStore
    from contextfold.testing.services import RedisServer

    with RedisServer(tmp_path) as server:
        store = RedisBlobStore(server.url)
        _check_stale_merge(store, monkeypatch, "redis")
        store.close()


def _check_stale_merge(store: BlobStore, monkeypatch: pytest.MonkeyPatch, tag: str) -> None:
    session = f"{NONCE}-{tag}"
    monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", _NEVER)
    SECRETS.saved(SecretMemory(store, session), "base", 1)  # the base, through 0
    merging_store, folding_store = HookedStore(store), HookedStore(store)
    merging, folding = SecretMemory(merging_store, session), SecretMemory(folding_store, session)
    assert merging.values() and folding.values()
    SECRETS.saved(merging, "m", 1)  # record 1

    def merging_saves_meanwhile() -> None:  # (the folding worker has read records 1 and 2 and decided to fold)
        monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", _NEVER)
        SECRETS.saved(merging, "m", FAN_IN - 3, start=1)  # records 3..7, over base 0

    folding_store.hook = ("put", r"\.b$", merging_saves_meanwhile)  # (its new base's write)
    folding.learn(SECRETS.value("fold", 0) * 40, "password")  # (outweighs the base: it folds)
    monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", 0)
    assert folding.save() and folding._through == 2  # record 2; base 1 through 2; records 1 and 2 deleted

    def killed() -> None:
        raise _Killed

    merging_store.hook_after = ("delete", r"\.1$", killed)  # (the last delete of a merge of records 1..8)
    merging.learn(SECRETS.value("m", FAN_IN - 2), "password")
    with contextlib.suppress(_Killed):
        merging.save()  # record 8 (a merge of 1..8 over base 0 would delete them, record 1 last)
    values = SecretMemory(store, session).values()
    expected = [SECRETS.value("base", 0), SECRETS.value("fold", 0) * 40] + [
        SECRETS.value("m", i) for i in range(FAN_IN - 1)]
    assert [value for value in expected if value not in values] == []


def test_a_load_past_a_gap_reads_a_run_aligned_to_an_older_base(store: BlobStore) -> None:
    # Fails on 6f2b645 (the review's seed 70, smaller): base 1 through 2, the run of 1..8 aligned to base 0, the run
    # of 11..18 and records 19..20 aligned to base 2, the note at 18. A load read past the note: 3..18 lost.
    session = f"{NONCE}-layout"
    key = memory_key(session)
    now = time.time()

    def values(*numbers: int) -> list[tuple[str, str]]:
        return [(SECRETS.value("r", n), "password") for n in numbers]

    store.put(base_key(key, 1), encode_record(values(0, 1, 2), now, through=2))
    store.put(run_key(key, 1, 1), encode_record(values(*range(1, 9)), now, through=8))
    store.put(segment_key(key, 10), encode_record(values(9, 10), now))  # (the record 9 a merge missed: in 10)
    store.put(run_key(key, 11, 1), encode_record(values(*range(11, 19)), now, through=18))
    for n in (19, 20):
        store.put(segment_key(key, n), encode_record(values(n), now))
    store.put(passed_key(key), encode_record((), now, through=18))
    loaded = SecretMemory(store, session).values()
    assert [n for n in range(21) if SECRETS.value("r", n) not in loaded] == []
