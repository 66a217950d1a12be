"""A merge or a fold killed before its deletes leaves keys no load reads: the next merge or fold deletes them.

Sixteenth session (lane S). A merge writes its run, raises the passed-over note, then deletes the records (or runs) it
merged; a fold writes its base, raises the note, then deletes the runs it holds and the previous base. A process
killed between the write and the deletes lost nothing (tests/redteam/test_redteam14_secret_memory_levels.py), but left
those keys in the shared store until the memory itself was deleted (retention, with its session): a fleet whose
workers are killed while they save (preemption, OOM) kept a few keys more for each such kill, for the session's life.

Now a merge deletes its group last first, so one killed among its deletes leaves the group's first member; whoever
merges or folds that run later looks for that member (one ``exists``) and deletes what the run merged. A fold that
finds a base with no more records in its slot (left by a fold killed before its deletes) deletes what that fold
held past it, within its records. Both only under a note at or above what they delete, and with a base or a run
holding it in the store: a load that stops at a key deleted then reads the store again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from secret_memory_workers import STORE_KINDS, HookedStore, Secrets, opened_store

from contextfold.cache.blobs import BlobStore
from contextfold.redact import SecretMemory
from contextfold.redact import memory as memory_module
from contextfold.redact._memory_records import FAN_IN, passed_key, run_key
from contextfold.redact.memory import memory_key

NONCE = "s16sleft"
SECRETS = Secrets(NONCE)


class _Killed(Exception):
    """The worker's process dies here."""


@pytest.fixture(params=[*STORE_KINDS, pytest.param("redis", marks=pytest.mark.redis)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    if request.param != "redis":
        yield from opened_store(request.param, tmp_path)
        return
    from contextfold.stores.redis_blob import RedisBlobStore

    server = request.getfixturevalue("redis_server")
    made = RedisBlobStore(server.url, prefix=f"{NONCE}-{request.node.name}:")
    yield made
    made.close()


def _keys(store: BlobStore, session: str) -> list[str]:
    """The memory's keys but its note."""
    key = memory_key(session)
    return sorted(e.key for e in store.entries() if e.key.startswith(key) and e.key != passed_key(key))


def _kill_at_first_delete(hooked: HookedStore, key: str) -> None:
    """Kill the worker at its next delete of a record or a run (before the key is deleted)."""

    def die() -> None:
        raise _Killed

    hooked.hook = ("delete", re.escape(key) + r"\.\d+(\.\d+)?$", die)


def test_records_a_killed_merge_left_are_deleted_by_the_next_merge_of_its_run(store: BlobStore) -> None:
    # Fails on 309338f: the FAN_IN records under the run of the killed merge stay in the store for the memory's life.
    session = f"{NONCE}-merge"
    key = memory_key(session)
    hooked = HookedStore(store)
    worker = SecretMemory(hooked, session)
    worker.learn(SECRETS.value("base", 0) * 40, "password")  # (a large base: no fold during the test)
    assert worker.save()
    SECRETS.saved(worker, "a", FAN_IN - 1)
    worker.learn(SECRETS.value("a", FAN_IN - 1), "password")
    _kill_at_first_delete(hooked, key)
    with pytest.raises(_Killed):
        worker.save()  # (the run of records 1..FAN_IN written and the note raised; none of them deleted)
    assert run_key(key, 1, 1) in _keys(store, session) and f"{key}.1" in _keys(store, session)
    other = SecretMemory(store, session)
    SECRETS.saved(other, "b", FAN_IN ** 2 - FAN_IN)  # (up to record FAN_IN ** 2: the runs of level 1 merge into one)
    assert _keys(store, session) == sorted([key, run_key(key, 1, 2)])
    expected = {SECRETS.value("base", 0) * 40, *(SECRETS.value("a", i) for i in range(FAN_IN)),
                *(SECRETS.value("b", i) for i in range(FAN_IN ** 2 - FAN_IN))}
    assert set(SecretMemory(store, session).values()) == expected


def test_keys_a_killed_fold_left_are_deleted_by_the_next_fold(store: BlobStore,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 309338f: the records and runs the killed fold held stay in the store for the memory's life (the next
    # fold deletes only the runs after the base it read, and writes over the base that fold left).
    monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", 0)  # (folds of a small memory: a short test)
    session = f"{NONCE}-fold"
    key = memory_key(session)
    hooked = HookedStore(store)
    worker = SecretMemory(hooked, session)
    worker.learn(SECRETS.value("base", 0) * 60, "password")  # (a base some FAN_IN records outweigh: a merge first)
    assert worker.save()
    # The fold writes its base in the other slot (<key>.b), raises the note, then deletes: killed at the first.
    hooked.hook_after = ("put", re.escape(key) + r"\.b$", lambda: _kill_at_first_delete(hooked, key))
    saved = 0
    with pytest.raises(_Killed):
        while True:
            worker.learn(SECRETS.value("a", saved), "password")
            assert worker.save(), saved
            saved += 1
    saved += 1  # (the save killed in its fold had written its record)
    left = _keys(store, session)
    assert f"{key}.b" in left and key in left and any(k.startswith(f"{key}.") and k != f"{key}.b" for k in left)
    assert saved >= FAN_IN  # (a run of level 1 among what the killed fold held)
    other = SecretMemory(store, session)
    more = 0
    while f"{key}.b" in _keys(store, session):  # (the next fold writes slot 0 over the left base, deletes slot 1)
        other.learn(SECRETS.value("b", more), "password")
        assert other.save()
        more += 1
        assert more < 200
    assert _keys(store, session) == [key]  # (this fold's own runs deleted, and what the killed one left)
    expected = {SECRETS.value("base", 0) * 60, *(SECRETS.value("a", i) for i in range(saved)),
                *(SECRETS.value("b", i) for i in range(more))}
    assert set(SecretMemory(store, session).values()) == expected


def test_a_fold_overtaken_at_every_try_loses_nothing_and_leaves_no_key(store: BlobStore,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    # A pin, not a fix (passes on 309338f too): a fold that other workers' folds overtake at each of its tries gives up
    # with nothing written (each try read the store anew); the overtaking folds hold every value, and the worker's
    # next fold, due or not, starts from the newest base. No record is lost, no key left.
    monkeypatch.setattr(memory_module, "_FOLD_MIN_BYTES", 0)
    session = f"{NONCE}-overtaken"
    key = memory_key(session)
    hooked = HookedStore(store)
    first = SecretMemory(hooked, session)
    first.learn(SECRETS.value("base", 0) * 60, "password")
    assert first.save()
    other = SecretMemory(store, session)
    assert other.values()  # (loaded: the same base as the first)
    overtaken = 0

    def overtake() -> None:  # (before each of the first's base writes: another worker saves and folds first)
        nonlocal overtaken
        other.learn(SECRETS.value("o", overtaken), "password")
        before = other._through
        assert other.save()
        if other._through == before:  # (its save did not fold: it folds now, once)
            other._fold()
        overtaken += 1
        if overtaken < memory_module._MAX_FOLD_TRIES:
            hooked.hook = ("put", re.escape(key) + r"(\.b)?$", overtake)

    hooked.hook = ("put", re.escape(key) + r"(\.b)?$", overtake)
    caplog.set_level("WARNING", logger="contextfold.redact.memory")
    saved = 0
    while overtaken < memory_module._MAX_FOLD_TRIES:
        first.learn(SECRETS.value("a", saved), "password")
        assert first.save()
        saved += 1
        assert saved < 200
    assert any("kept overtaking" in r.getMessage() for r in caplog.records)
    expected = {SECRETS.value("base", 0) * 60, *(SECRETS.value("a", i) for i in range(saved)),
                *(SECRETS.value("o", i) for i in range(overtaken))}
    assert set(SecretMemory(store, session).values()) == expected
    first.learn(SECRETS.value("a", saved), "password")
    assert first.save()
    first._fold()  # (now unopposed)
    assert _keys(store, session) in ([key], [f"{key}.b"])
    assert set(SecretMemory(store, session).values()) == expected | {SECRETS.value("a", saved)}
