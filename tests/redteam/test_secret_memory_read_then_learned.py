"""A value a worker first read from another worker's record, then found itself, is written by it too.

Seventeenth stop's "left out" (1 of 300 stress seeds, workers sharing values, seed 156, no kill): worker B appended
record 21 holding X; before B read the passed-over note, worker A loaded (reading 21), appended and merged records
22.. (raising the note past 21), and found X itself: already known, nothing to write, its save said stored. B then
read a note at or above its number, took its record 21 back as passed over and deleted it: until B appended again
(never, had it died), no load held X. A worker now writes a value it knew only from another worker's record
(not a base or a merged run) when it finds it itself.
"""

from __future__ import annotations

import pytest
from secret_memory_workers import HookedStore, Secrets

from contextfold.redact import SecretMemory
from contextfold.redact._memory_records import note_passed
from contextfold.redact.memory import memory_key
from contextfold.stores.memory import MemoryBlobStore

NONCE = "s18srtl3"
SECRETS = Secrets(NONCE)
REREAD_NONCE = "f2rr5q8m"
REREAD_SECRETS = Secrets(REREAD_NONCE)


class _Killed(Exception):
    """The worker's process dies here."""


def _die() -> None:
    raise _Killed


def test_a_value_read_from_a_record_its_writer_takes_back_is_written_by_the_worker_that_found_it() -> None:
    session = f"{NONCE}-taken-back"
    shared = MemoryBlobStore()
    base = SecretMemory(shared, session)
    base.learn(SECRETS.value("base", 0) * 40, "password")  # (a large base: no fold during the test)
    assert base.save()
    writer_store = HookedStore(shared)
    writer = SecretMemory(writer_store, session)
    writer.values()  # (its next record: 1)
    finder = SecretMemory(shared, session)
    value = SECRETS.value("both", 0)

    def meanwhile() -> None:  # (the writer's record 1 is in; it has not read the note yet)
        assert value in finder.values()  # (the finder's load reads record 1)
        finder.learn(value, "password")  # (found in its own text too)
        finder.save()
        assert not finder._unsaved  # (its save says the value is stored)
        # Another worker's merge of later records raises the note past record 1; the writer takes record 1 back
        # and dies before writing it again.
        assert note_passed(shared, memory_key(session), 2)
        writer_store.hook_after = ("delete", r"\.1$", _die)

    writer_store.hook_after = ("put", r"\.1$", meanwhile)
    writer.learn(value, "password")
    with pytest.raises(_Killed):
        writer.save()
    assert value in SecretMemory(shared, session).values()  # 08dd6b2: gone from every load


def test_a_value_known_only_from_a_base_is_not_written_again() -> None:
    session = f"{NONCE}-base"
    shared = MemoryBlobStore()
    first = SecretMemory(shared, session)
    value = SECRETS.value("base", 1) * 40
    first.learn(value, "password")
    assert first.save()  # (the first save writes a base)
    again = SecretMemory(shared, session)
    assert value in again.values()
    again.learn(value, "password")
    assert not again._unsaved  # (a base is what a fold or the first save wrote: nothing to write again)


def test_the_mark_survives_a_save_that_reads_the_record_again() -> None:
    """Review of lane S: a save's re-read of the passed-over record (learning it again) wiped the "read only" mark.

    Its own append passed over, the finder's save reads the whole store again (record 1 included): what it learns
    there is not "found here", so the value it finds itself afterwards is still written by it.
    """
    session = f"{REREAD_NONCE}-reread"
    shared = MemoryBlobStore()
    base = SecretMemory(shared, session)
    base.learn(REREAD_SECRETS.value("base", 0) * 40, "password")
    assert base.save()
    writer_store = HookedStore(shared)
    writer = SecretMemory(writer_store, session)
    writer.values()
    finder = SecretMemory(shared, session)
    value = REREAD_SECRETS.value("both", 0)
    seen: dict[str, bool] = {}

    def meanwhile() -> None:
        assert value in finder.values()  # load reads record 1: marked read-only
        seen["after_load"] = value in finder._read_only
        # Another worker's merge raises the note past 2: the finder's next append (at 2) is passed over, and
        # its save reads the whole store again (record 1 included).
        assert note_passed(shared, memory_key(session), 2)
        finder.learn(REREAD_SECRETS.value("other", 0), "password")
        finder.save()
        seen["after_reread"] = value in finder._read_only
        finder.learn(value, "password")  # found in its own text
        finder.save()
        writer_store.hook_after = ("delete", r"\.1$", _die)

    writer_store.hook_after = ("put", r"\.1$", meanwhile)
    writer.learn(value, "password")
    with pytest.raises(_Killed):
        writer.save()
    assert seen["after_load"]
    lost = value not in SecretMemory(shared, session).values()
    assert seen["after_reread"] or not lost, "mark cleared by the re-read AND the value is lost"
    assert value in SecretMemory(shared, session).values()
