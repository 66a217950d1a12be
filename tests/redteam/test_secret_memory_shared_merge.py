"""Two workers merging one group of records, and a fold landing inside a load: nothing saved is lost or read past.

Found by the sixteenth session's fourth review (a stress of 2-3 gated worker threads: 3 of 300 seeds lost values).
(1) Two workers that both read records 1..8 both merge them into the run of key ``.1.1``. The first wrote it, raised
the note and deleted the records; the second wrote its copy over the first's (a plain ``put``), found the note raised
above what it had seen, gave up and took its run back (``put_if`` matched: it had just written it): the records and
the run that held them were both gone. A merge now writes its run only where no key is (``put_new``); when one is
there, another worker's merge of the same group wrote it, and it is left alone.
(2) A load took the passed-over note read AFTER its layout as seen: another worker folding between the two reads left
it with the old base and the new note, so no later check found its base stale; its merges landed aligned to the old
base and every load read past a gap (hundreds of store reads each). Staleness is now judged by the note read before.
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
from contextfold.redact._memory_records import FAN_IN
from contextfold.stores.memory import MemoryBlobStore

NONCE = "rtshmrg3w"
SECRETS = Secrets(NONCE)
_NEVER = 10**12  # (a fold threshold no test reaches)
# Values saved before the fold of test (2): its records end where the stale base's alignment and the new one's differ.
_SAVED_BEFORE_FOLD = 40
# A fresh load's store reads at most, for the layout test (2) leaves: 9 with the fix; 132 on 33be69a (a gap read past).
_MAX_LOAD_GETS = 24


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    yield from opened_store(request.param, tmp_path)


def test_two_workers_merging_one_group_keep_its_records(store: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 33be69a: the records 1..8 and their run .1.1 both deleted; the values of 1..7 missing from every load.
    _check_one_group_merged_twice(store, monkeypatch, "mem")


@pytest.mark.redis
def test_over_redis_two_workers_merging_one_group_keep_its_records(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    from contextfold.stores.redis_blob import RedisBlobStore
    from contextfold.testing.services import RedisServer

    with RedisServer(tmp_path) as server:
        store = RedisBlobStore(server.url)
        _check_one_group_merged_twice(store, monkeypatch, "redis")
        store.close()


def _check_one_group_merged_twice(store: BlobStore, monkeypatch: pytest.MonkeyPatch, tag: str) -> None:
    session = f"{NONCE}-{tag}"
    monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", _NEVER)
    SECRETS.saved(SecretMemory(store, session), "base", 1)  # the base, through 0
    first_store, second_store = HookedStore(store), HookedStore(store)
    first, second = SecretMemory(first_store, session), SecretMemory(second_store, session)
    SECRETS.saved(first, "r", FAN_IN - 1)  # records 1..7
    assert second.values()  # (it has read records 1..7)
    shared = SECRETS.value("both", 0)  # (a secret both workers found: record 8, saved by the first)
    second.learn(shared, "password")

    def other_merges_first() -> None:  # (the first has written record 8; it is about to write the run of 1..8)
        assert second.save()  # reads record 8 (its value saved), merges 1..8, raises the note, deletes 1..8

    first_store.hook = ("put", r"\.1\.1$", other_merges_first)
    first.learn(shared, "password")
    first.save()
    expected = [SECRETS.value("base", 0), shared] + [SECRETS.value("r", i) for i in range(FAN_IN - 1)]
    for loaded in (SecretMemory(store, session).values(), first.values(), second.values()):
        assert [value for value in expected if value not in loaded] == []


class _Counting(MemoryBlobStore):
    """The process's store, counting its reads."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    def get(self, key: str) -> bytes:
        self.gets += 1
        return super().get(key)


def test_a_fold_inside_a_load_leaves_no_gap_for_later_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 33be69a: the loading worker kept base 0 with the folder's note, its 8 later records merged aligned to
    # base 0; a fresh load then read past a gap below the note (132 store reads, against 9).
    monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", _NEVER)
    session = f"{NONCE}-fold-in-load"
    store = _Counting()
    SECRETS.saved(SecretMemory(store, session), "early", _SAVED_BEFORE_FOLD)  # base through 0, records 1..39
    folding = SecretMemory(store, session)
    assert folding.values()
    hooked = HookedStore(store)
    loading = SecretMemory(hooked, session)

    def fold_at_the_next_note_read() -> None:  # (the loading worker has read the bases; its records follow)
        hooked.hook = ("get", r"\.p$", folding._fold)  # (the note read after its layout)

    hooked.hook_after = ("get", r"\.b$", fold_at_the_next_note_read)
    assert loading.values()
    assert folding._through == _SAVED_BEFORE_FOLD - 1 and hooked.hook is None  # (the fold ran inside the load)
    SECRETS.saved(loading, "late", FAN_IN)
    store.gets = 0
    loaded = SecretMemory(store, session).values()
    assert store.gets <= _MAX_LOAD_GETS
    expected = [SECRETS.value("early", i) for i in range(_SAVED_BEFORE_FOLD)] + [
        SECRETS.value("late", i) for i in range(FAN_IN)]
    assert [value for value in expected if value not in loaded] == []
