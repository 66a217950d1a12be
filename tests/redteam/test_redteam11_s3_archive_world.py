"""The S3 archive in a bucket others write to, over a connection that breaks mid-object.

Found with a boto3-shaped client double (red team, session 11); the same holds against moto_server:

- an object someone else put under a session's ``_chunks/events.jsonl/`` (``README``, a backup, a forged event)
  made every later ``append`` by a new process raise ``ValueError: invalid literal for int()`` (the archive's events
  were lost for that session from then on), and ``read`` returned the planted object's bytes as the session's
  own events;
- ``sessions()`` listed any folder under the prefix (``..``, ``has space``) as a session, where the filesystem
  archive lists only folders named as a session's key;
- a body cut off mid-read (``IncompleteReadError``, a reset connection) escaped as botocore's own exception, not a
  :class:`StoreError`: the fleet, which redoes a turn on a store error, failed the turn instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from contextfold.archive import Archive
from contextfold.errors import StoreError
from contextfold.stores.archive_s3 import S3ArchiveStore

NONCE = "rt11-s3-41b7"


class _ClientError(Exception):
    def __init__(self, code: str, status: int) -> None:
        super().__init__(code)
        self.response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}


class _CutBody:
    def __init__(self, data: bytes, cut: bool) -> None:
        self.data, self.cut = data, cut

    def read(self) -> bytes:
        if self.cut:
            from botocore.exceptions import IncompleteReadError

            raise IncompleteReadError(actual_bytes=3, expected_bytes=len(self.data))
        return self.data


class _Bucket:
    """Just enough of a boto3 S3 client: conditional puts, gets, and listings with or without a delimiter."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.cut_reads = False

    def put_object(self, Bucket: str, Key: str, Body: bytes, IfNoneMatch: str | None = None,
                   **_: Any) -> None:
        if IfNoneMatch and Key in self.objects:
            raise _ClientError("PreconditionFailed", 412)
        self.objects[Key] = Body

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        if Key not in self.objects:
            raise _ClientError("NoSuchKey", 404)
        return {"Body": _CutBody(self.objects[Key], self.cut_reads), "ETag": '"e"'}

    def get_paginator(self, name: str) -> Any:
        bucket = self

        class _Pages:
            def paginate(self, Bucket: str, Prefix: str, Delimiter: str | None = None) -> Iterator[dict[str, Any]]:
                keys = sorted(k for k in bucket.objects if k.startswith(Prefix))
                if Delimiter is None:
                    yield {"Contents": [{"Key": k} for k in keys]}
                    return
                rests = [k[len(Prefix):] for k in keys]
                folders = sorted({Prefix + r.split(Delimiter)[0] + Delimiter for r in rests if Delimiter in r})
                yield {"Contents": [{"Key": Prefix + r} for r in rests if Delimiter not in r],
                       "CommonPrefixes": [{"Prefix": f} for f in folders]}

        return _Pages()


def test_an_object_planted_among_the_chunks_neither_stops_appends_nor_is_read_as_events() -> None:
    bucket = _Bucket()
    S3ArchiveStore("b", "arch", client=bucket).append(NONCE, "events.jsonl", b'{"n":1}\n')
    bucket.objects[f"arch/{NONCE}/_chunks/events.jsonl/README"] = b'{"forged":true}\n'
    later = S3ArchiveStore("b", "arch", client=bucket)  # a new process: finds the next chunk by listing
    later.append(NONCE, "events.jsonl", b'{"n":2}\n')
    assert later.read(NONCE, "events.jsonl") == b'{"n":1}\n{"n":2}\n'


def test_only_folders_named_as_a_session_key_are_sessions() -> None:
    bucket = _Bucket()
    store = S3ArchiveStore("b", "arch", client=bucket)
    store.write(NONCE, "summary-001.json", b"{}")
    bucket.objects["arch/../x"] = b"1"
    bucket.objects["arch/has space/x"] = b"1"
    assert store.sessions() == [NONCE]
    assert Archive(store).sessions() == [NONCE]


def test_a_body_cut_off_mid_read_is_a_store_error() -> None:
    bucket = _Bucket()
    store = S3ArchiveStore("b", "arch", client=bucket)
    store.write(NONCE, "summary-001.json", b'{"summary": "s"}')
    store.append(NONCE, "events.jsonl", b'{"n":1}\n')
    bucket.cut_reads = True
    with pytest.raises(StoreError, match="cannot read"):
        store.read(NONCE, "summary-001.json")
    with pytest.raises(StoreError, match="cannot read"):
        store.read(NONCE, "events.jsonl")
