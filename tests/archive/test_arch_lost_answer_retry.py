"""A transcript write whose answer was lost after it landed is not archived again by the retry (s20).

Found on a9a74c5 with each real store (a folder, moto_server's S3, redis-server) behind :class:`LosesAnswers`: a
compaction whose transcript write raised ``StoreError`` after the store kept it failed, and the next turn's
compaction archived the view again under the next number: every message of the first transcript twice, and
``status`` counting two compactions for one. (The S3 store's fix of s19 covers botocore's own resend only.) The
archive now remembers a write that raised; a retry whose records hold all of its finds the landed file (its exact
bytes) and replaces it, or leaves it when it is the same.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _lost_answer import LosesAnswers
from conftest import running_moto

from contextfold.archive import Archive, ArchiveStore
from contextfold.errors import StoreError
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.stores.archive_fs import FilesystemArchiveStore
from contextfold.testing.services import MotoServer, RedisServer

NONCE = "s20g-lost-answer-Vb3"
BUCKET = "s20g-lost-answers"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with running_moto(BUCKET) as server:
        yield server


@pytest.fixture(params=["folder", "s3", "redis"])
def real_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ArchiveStore]:
    store: ArchiveStore
    if request.param == "folder":
        store = FilesystemArchiveStore(tmp_path / "archive")
    elif request.param == "s3":
        from contextfold.stores.archive_s3 import S3ArchiveStore

        moto: MotoServer = request.getfixturevalue("moto")
        store = S3ArchiveStore(BUCKET, uuid.uuid4().hex, endpoint_url=moto.url, path_style=True, region="us-east-1")
    else:
        from contextfold.stores.redis_archive import RedisArchiveStore

        redis_server: RedisServer = request.getfixturevalue("redis_server")
        store = RedisArchiveStore(redis_server.url, prefix=f"cf-{uuid.uuid4().hex}")
    yield store
    store.close()


def _turns(start: int, count: int) -> list[Message]:
    return [m for i in range(start, start + count)
            for m in (Message.user(f"{NONCE} q{i} " + "word " * 100), Message.assistant(f"a{i} " + "text " * 100))]


def _texts(archive: Archive, n: int) -> list[str]:
    return [m.text for m in archive.transcript("s1", n)]


def test_a_retry_with_more_records_replaces_the_landed_write(real_store: ArchiveStore) -> None:
    store = LosesAnswers(real_store)
    archive = Archive(store)
    view = [Message.system("sys"), *_turns(0, 5)]
    store.lose = 1
    with pytest.raises(StoreError):
        archive.archive_transcript("s1", view)
    assert store.lost == ["transcript-pre-compact-001.jsonl"]  # landed, answer lost
    grown = [*view, *_turns(5, 1)]
    assert archive.archive_transcript("s1", grown) == 1  # (a9a74c5: 2, the first five turns archived twice)
    assert archive.transcript_numbers("s1") == [1]
    assert _texts(archive, 1) == [m.text for m in grown]
    assert archive.archive_transcript("s1", [*grown, *_turns(6, 1)]) == 2  # later compactions as before


def test_the_same_records_again_are_a_no_op(real_store: ArchiveStore) -> None:
    store = LosesAnswers(real_store)
    archive = Archive(store)
    view = [Message.system("sys"), *_turns(0, 3)]
    store.lose = 1
    with pytest.raises(StoreError):
        archive.archive_transcript("s1", view)
    assert archive.archive_transcript("s1", view) == 1
    assert archive.transcript_numbers("s1") == [1] and _texts(archive, 1) == [m.text for m in view]


class _FailsBeforeWriting(LosesAnswers):
    """A store whose next transcript write fails before anything is stored (a refused connection)."""

    def write_chunks(self, session_id: str, name: str, chunks: object, *, exclusive: bool = False) -> int:
        if self.lose:
            self.lose -= 1
            raise StoreError("connection refused")
        return super().write_chunks(session_id, name, chunks, exclusive=exclusive)  # type: ignore[arg-type]

    def write(self, session_id: str, name: str, data: bytes, *, exclusive: bool = False) -> None:
        if self.lose:
            self.lose -= 1
            raise StoreError("connection refused")
        super().write(session_id, name, data, exclusive=exclusive)


def test_a_write_that_did_not_land_and_other_records_are_archived_as_before(tmp_path: Path) -> None:
    store = _FailsBeforeWriting(FilesystemArchiveStore(tmp_path / "archive"))
    archive = Archive(store)
    view = [Message.system("sys"), *_turns(0, 2)]
    store.lose = 1
    with pytest.raises(StoreError):
        archive.archive_transcript("s1", view)
    assert archive.transcript_numbers("s1") == []
    assert archive.archive_transcript("s1", view) == 1 and _texts(archive, 1) == [m.text for m in view]
    lost = LosesAnswers(FilesystemArchiveStore(tmp_path / "other"))
    other = Archive(lost)
    lost.lose = 1
    with pytest.raises(StoreError):
        other.archive_transcript("s1", view)
    dropped = [Message.user("a result whose call was compacted away")]  # holds none of the lost write's records
    assert other.archive_transcript("s1", dropped) == 2  # the landed transcript is kept, not replaced
    assert _texts(other, 1) == [m.text for m in view] and _texts(other, 2) == [dropped[0].text]


def test_another_writers_transcript_under_that_number_is_not_taken(tmp_path: Path) -> None:
    inner = FilesystemArchiveStore(tmp_path / "archive")
    store = _FailsBeforeWriting(inner)
    archive = Archive(store)
    view = [Message.system("sys"), *_turns(0, 2)]
    store.lose = 1
    with pytest.raises(StoreError):
        archive.archive_transcript("s1", view)
    Archive(inner).archive_transcript("s1", [Message.user("another process's transcript")])  # claims 001
    assert archive.archive_transcript("s1", [*view, *_turns(2, 1)]) == 2
    assert _texts(archive, 1) == ["another process's transcript"]


def _manager(archive: Archive) -> ContextManager:
    return ContextManager("gpt-4o", max_context_tokens=4000, store="memory", archive=archive, session_id="s1")


def test_the_next_turn_does_not_archive_the_transcript_again(real_store: ArchiveStore) -> None:
    store = LosesAnswers(real_store)
    archive = Archive(store)
    with _manager(archive) as cm:
        cm.add([Message.system("sys"), *_turns(0, 40)])
        store.lose = 1
        with pytest.raises(StoreError):
            cm.prepare("openai_chat")  # the compaction's transcript landed; its answer did not
        cm.add(Message.user(f"{NONCE} next"))
        cm.prepare("openai_chat")
    assert archive.transcript_numbers("s1") == [1]  # (a9a74c5: [1, 2], 81 messages archived twice)
    texts = _texts(archive, 1)
    assert texts[-1] == f"{NONCE} next" and len(texts) == len(set(texts)) == 82


# -- review of s20g: what the replacement must not lose ----------------------------------------------------------


def _said(role: str, text: str, message_id: str) -> Message:
    return (Message.user(text) if role == "user" else Message.assistant(text)).with_meta(id=message_id)


def _lost_write(store: LosesAnswers, archive: Archive, view: list[Message]) -> None:
    store.lose = 1
    with pytest.raises(StoreError):
        archive.archive_transcript("s1", view)


def test_a_retry_holding_a_repeated_message_fewer_times_is_archived_anew(real_store: ArchiveStore) -> None:
    store = LosesAnswers(real_store)
    archive = Archive(store)
    landed = [_said("user", "go", "1"), _said("assistant", "x", "2"), _said("user", "ok", "3"),
              _said("assistant", "y", "4"), _said("user", "ok", "5")]
    _lost_write(store, archive, landed)
    # (s20g: 1 — the five landed messages replaced by four, the repeated "ok" taken as held)
    assert archive.archive_transcript("s1", landed[:4]) == 2
    assert [(m.text, m.meta["id"]) for m in archive.transcript("s1", 1)] == [
        ("go", "1"), ("x", "2"), ("ok", "3"), ("y", "4"), ("ok", "5")]


def test_a_landed_write_is_not_replaced_once_a_later_transcript_exists(real_store: ArchiveStore) -> None:
    store = LosesAnswers(real_store)
    archive = Archive(store)
    alpha, beta = _said("user", f"alpha {NONCE}", "1"), _said("assistant", "beta", "2")
    _lost_write(store, archive, [alpha, beta])
    assert archive.archive_transcript("s1", [_said("user", "summary and gamma", "3")]) == 2
    # (s20g: 1 — transcript 1 overwritten with this view although transcript 2 came after it)
    assert archive.archive_transcript("s1", [alpha, beta, _said("user", "delta", "4")]) == 3
    assert _texts(archive, 1) == [f"alpha {NONCE}", "beta"]
    assert archive.transcript_numbers("s1") == [1, 2, 3]


def test_a_retry_changing_a_landed_messages_meta_is_archived_anew(real_store: ArchiveStore) -> None:
    store = LosesAnswers(real_store)
    archive = Archive(store)
    landed = _said("user", "go", "orig-id").with_meta(ref="tout_00000000000000aa", kind="masked")
    _lost_write(store, archive, [landed])
    # (s20g: 1 — the landed message's id, ref and kind replaced by the retry's)
    assert archive.archive_transcript("s1", [_said("user", "go", "other-id")]) == 2
    assert [dict(m.meta) for m in archive.transcript("s1", 1)] == [
        {"id": "orig-id", "ref": "tout_00000000000000aa", "kind": "masked"}]
