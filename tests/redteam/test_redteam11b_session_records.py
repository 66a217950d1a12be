"""A session record someone else wrote under our keys is a StoreError naming where it is, never a raw exception.

The session stores are shared (a Redis a whole fleet uses, an SQLite file of several processes): another program, an
older release or a hand edit can leave anything there. Found by writing hostile values under a saved session's keys
on a real redis-server and in a tampered SQLite row: a message nested past the JSON reader's depth raised
RecursionError, a version that is no whole number (``abc``, 5,000 digits, ``-3``, ``1.5``, an SQLite ``inf``) raised
ValueError or OverflowError (or, negative, made every save fail on the caller's own version check), a head field that
is no UTF-8 raised UnicodeDecodeError, and a fleet turn mark that is no number raised ValueError out of
``FleetWorker.turn`` as if the caller had given a bad turn. The fleet worker and the proxy retry or report a
StoreError; any other exception ended the request or the worker's loop.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.errors import CorruptRecord, StoreError
from contextfold.fleet import FleetWorker
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.stores.memory import MemoryBlobStore
from contextfold.stores.redis_session import RedisSessionStore
from contextfold.stores.session import MemorySessionStore
from contextfold.stores.session_local import LocalSessionStore
from contextfold.testing.services import RedisServer

NONCE = "rt11b-records-7f3a"
HEAD = "contextfold:session:s:head"
ITEMS = "contextfold:session:s:messages"
# A message nested deeper than Python's recursion limit: json.loads raises RecursionError on it.
TOO_DEEP = "[" * 100_000
# Valid JSON the reader takes, but deeper than any message may nest (every later walk of a message recurses).
DEEP_META = '{"role":"user","content":"x","meta":' + '{"a":' * 900 + "1" + "}" * 900 + "}"

REDIS_TAMPERINGS: dict[str, Callable[[redis.Redis], object]] = {
    "message nested past the reader": lambda c: c.lset(ITEMS, 0, TOO_DEEP),
    "message nested past a message's limit": lambda c: c.lset(ITEMS, 0, DEEP_META),
    "version that is text": lambda c: c.hset(HEAD, "version", "abc"),
    "version of 5,000 digits": lambda c: c.hset(HEAD, "version", "9" * 5000),
    "negative version": lambda c: c.hset(HEAD, "version", "-3"),
    "head field that is no UTF-8": lambda c: c.hset(HEAD, b"mark:\xff", b"\xfe"),
}


@pytest.mark.redis
@pytest.mark.parametrize("tampering", list(REDIS_TAMPERINGS))
def test_a_tampered_redis_session_is_a_store_error_naming_its_key(redis_server: RedisServer, tampering: str) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    with RedisSessionStore(redis_server.url) as store:
        store.save("s", [Message("user", f"{NONCE} hello")], 0)
        REDIS_TAMPERINGS[tampering](client)
        with pytest.raises(StoreError, match="Redis key 'contextfold:session:s:"):
            store.load_state("s")
        if "version" in tampering:
            with pytest.raises(StoreError, match=r"stored version .* no whole number"):
                store.version("s")
            with pytest.raises(StoreError, match=r"stored version .* no whole number"):
                store.save("s", [Message("user", f"{NONCE} again")], 1)
    client.close()


SQLITE_TAMPERINGS = {
    "message nested past the reader": ("UPDATE session_messages SET data = ?", (TOO_DEEP,)),
    "message nested past a message's limit": ("UPDATE session_messages SET data = ?", (DEEP_META,)),
    "version that is text": ("UPDATE sessions SET version = 'abc'", ()),
    "version too large for an integer": ("UPDATE sessions SET version = ?", ("9" * 5000,)),  # SQLite keeps inf
    "negative version": ("UPDATE sessions SET version = -4", ()),
    "fractional version": ("UPDATE sessions SET version = 1.5", ()),
    "mark that is no UTF-8": ("UPDATE session_marks SET value = ?", (b"\xff",)),
}


@pytest.mark.parametrize("tampering", list(SQLITE_TAMPERINGS))
def test_a_tampered_sqlite_session_is_a_store_error_naming_the_file(tmp_path: Path, tampering: str) -> None:
    with LocalSessionStore(tmp_path) as store:
        store.save("s", [Message("user", f"{NONCE} hello")], 0, marks={"turn": "1"})
    sql, args = SQLITE_TAMPERINGS[tampering]
    db = sqlite3.connect(tmp_path / "sessions.sqlite3")
    db.execute(sql, args)
    db.commit()
    db.close()
    with LocalSessionStore(tmp_path) as store:
        with pytest.raises(StoreError, match=r"sessions\.sqlite3 table \w+, session 's'"):
            store.load_state("s")
        if "version" in tampering:
            with pytest.raises(StoreError, match=r"stored version .* no whole number"):
                store.save("s", [Message("user", f"{NONCE} again")], 1)
            assert store.delete("s")  # the way out stays open


@pytest.mark.parametrize("mark", ["abc", "9" * 5000, "-1", "1.5"])
def test_a_turn_mark_that_is_no_number_is_a_store_error_not_a_bad_turn(mark: str) -> None:
    sessions = MemorySessionStore()
    sessions.save("s", [Message("user", f"{NONCE} hello")], 0, marks={"turn": mark})
    archive = Archive(MemoryArchiveStore(), redactor=Redactor(enabled=False))
    waits: list[float] = []
    worker = FleetWorker(sessions, blobs=MemoryBlobStore(), archive=archive, sleep=waits.append)
    with pytest.raises(CorruptRecord, match="stored mark 'turn'"):  # (a StoreError)
        worker.turn("s", 1, [Message("user", f"{NONCE} next")])
    # Reported at once (lead): the worker retried it like an outage, 12 attempts and ~8.5 s of backoff.
    assert waits == []
