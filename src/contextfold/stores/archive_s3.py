"""The S3 archive: the filesystem layout as object keys, ``{prefix}/{session_id}/{name}``.

Works with AWS and S3-compatible servers (MinIO, Ceph, moto): give ``endpoint_url`` and, for servers without
virtual-host buckets, ``path_style=True``. ``sse_kms_key_id`` encrypts every object with that KMS key.

A PUT is atomic in S3, so whole files need nothing more. ``exclusive`` writes use ``If-None-Match: *``.

S3 has no append, and rewriting a whole ``events.jsonl`` for every batch of events costs O(file) per append and
races between workers. So an append writes a new object, a chunk: ``{prefix}/{session_id}/_chunks/{name}/{seq}``,
claimed with ``If-None-Match: *`` (two workers never get one sequence number; the loser takes the next).
``read(name)`` is the whole object ``name`` (written by ``write`` or by older versions' appends) followed by its
chunks in sequence order; ``names`` lists a name that only has chunks too. Chunk folders start with ``_``, which no
name may, so they never clash with a name.
Needs ``pip install 'contextfold[s3]'``.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from typing import Any

from ..archive import validate_session_id
from ..errors import MissingExtra, StoreError

__all__ = ["S3ArchiveStore"]

# Appends claim the next free chunk number; when another writer took it, the next one is tried, and after this
# many collisions the folder is listed again to jump past everything written meanwhile.
_APPEND_RETRIES = 8
# Sequence numbers of chunks, zero-padded so that S3's lexicographic listing is their order.
_SEQ_DIGITS = 12
# A chunk's key ends in its sequence number and nothing else: another object under the chunk folder (one a person or
# another tool put there) is not the session's, neither read as part of the file nor taken for a number.
_SEQ_RE = re.compile(rf"[0-9]{{{_SEQ_DIGITS}}}")
_CHUNKS = "_chunks"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,199}$")
# A conditional write's own mark, sent as object metadata. A PUT whose answer was lost after the object was stored
# (a reset connection, a 5xx from a proxy) is sent again by botocore's retries, and the copy is refused as a conflict
# with the object the first one stored: the mark tells that object ours, not another writer's. Without it an events
# append was written twice and a compaction's transcript archived under two numbers.
_WRITE_MARK = "contextfold-write"
_CONFLICT_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "412", "409"})
# AWS answers 409 ConditionalRequestConflict while another conditional write of the same key is in flight: that
# write may fail and leave the key free, so the same key is tried again (after a short wait) before it is given up
# as taken; taking the next number at once left a gap, or put a compaction's transcript under 002 with 001 free.
_IN_FLIGHT_CODES = frozenset({"ConditionalRequestConflict", "409"})
_IN_FLIGHT_WAITS = (0.05, 0.1, 0.2, 0.4)
_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    error = response.get("Error", {}) if isinstance(response, dict) else {}
    code = str(error.get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
    return code or str(status or "")


class S3ArchiveStore:
    """An :class:`~contextfold.archive.ArchiveStore` in an S3 bucket.

    Args:
        bucket: the bucket (it must exist).
        prefix: a key prefix such as ``"archive"`` (no leading or trailing slash needed).
        client: a ready boto3 S3 client; when given, the connection arguments below are ignored.
        endpoint_url: an S3-compatible server, e.g. ``"http://127.0.0.1:9000"``.
        region: the bucket's region.
        path_style: address buckets as ``{endpoint}/{bucket}/key`` rather than ``{bucket}.{endpoint}/key``.
        sse_kms_key_id: encrypt objects with SSE-KMS under this key id or ARN.
        sse: the server-side encryption algorithm to request without a KMS key (``"AES256"``), if any.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        client: Any = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        path_style: bool = False,
        sse_kms_key_id: str | None = None,
        sse: str | None = None,
    ) -> None:
        if not bucket:
            raise ValueError("bucket: must not be empty")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.sse_kms_key_id = sse_kms_key_id
        self.sse = "aws:kms" if sse_kms_key_id else sse
        self.client = client if client is not None else _make_client(endpoint_url, region, path_style)
        # (session, name) -> the next chunk number this process expects to be free (saves a listing per append)
        self._next_chunk: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def _key(self, session_id: str, name: str = "") -> str:
        validate_session_id(session_id)
        if name and not _NAME_RE.fullmatch(name):
            raise ValueError(f"name {name!r}: use letters, digits, '.', '_' or '-', starting with a letter or digit")
        base = f"{self.prefix}/{session_id}/" if self.prefix else f"{session_id}/"
        return base + name

    def _put_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {}
        if self.sse:
            args["ServerSideEncryption"] = self.sse
        if self.sse_kms_key_id:
            args["SSEKMSKeyId"] = self.sse_kms_key_id
        return args

    def write(self, session_id: str, name: str, data: bytes, *, exclusive: bool = False) -> None:
        """PUT the object; ``exclusive`` adds ``If-None-Match: *`` and raises ``FileExistsError`` on a conflict."""
        key = self._key(session_id, name)
        args = self._put_args()
        mark = secrets.token_hex(16)
        if exclusive:
            args["IfNoneMatch"] = "*"
            args["Metadata"] = {_WRITE_MARK: mark}
        try:
            self._put(key, data, args)
        except Exception as exc:
            if exclusive and _error_code(exc) in _CONFLICT_CODES:
                if self._written_by(key, mark):
                    return
                raise FileExistsError(f"s3://{self.bucket}/{key} exists") from None
            raise StoreError(f"s3://{self.bucket}/{key}: cannot write: {exc}") from exc

    def _put(self, key: str, data: bytes, args: dict[str, Any]) -> None:
        """PUT ``data`` at ``key``, sent again while S3 answers that a conditional write of the key is in flight."""
        for wait in (*_IN_FLIGHT_WAITS, None):
            try:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=data, **args)
                return
            except Exception as exc:
                if wait is None or _error_code(exc) not in _IN_FLIGHT_CODES:
                    raise
            time.sleep(wait)  # (a backoff before asking S3 again, not a synchronisation)

    def _written_by(self, key: str, mark: str) -> bool:
        """Whether the object at ``key`` is the one a write marked ``mark`` stored (see :data:`_WRITE_MARK`)."""
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _error_code(exc) in _MISSING_CODES:
                return False
            raise StoreError(f"s3://{self.bucket}/{key}: cannot read: {exc}") from exc
        metadata = head.get("Metadata") if isinstance(head, dict) else None
        return isinstance(metadata, dict) and metadata.get(_WRITE_MARK) == mark

    def _get(self, key: str) -> tuple[bytes, str] | None:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _error_code(exc) in _MISSING_CODES:
                return None
            raise StoreError(f"s3://{self.bucket}/{key}: cannot read: {exc}") from exc
        try:
            body = response["Body"].read()
        except Exception as exc:  # cut off mid-object (a reset connection, a short body): as retryable as a failed GET
            raise StoreError(f"s3://{self.bucket}/{key}: cannot read: {exc}") from exc
        return body, str(response.get("ETag", ""))

    def read(self, session_id: str, name: str) -> bytes | None:
        """The object's bytes followed by its appended chunks, or None when there is neither."""
        whole = self._get(self._key(session_id, name))
        chunk_keys = self._chunk_keys(session_id, name)
        if whole is None and not chunk_keys:
            return None
        parts = [whole[0]] if whole is not None else []
        for key in chunk_keys:
            found = self._get(key)
            if found is not None:  # (a chunk deleted by hand meanwhile is simply not there)
                parts.append(found[0])
        return b"".join(parts)

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Add ``data`` after everything appended so far, as a new chunk object (nothing is rewritten)."""
        self._key(session_id, name)  # validates both
        if not data:
            return
        slot = (session_id, name)
        with self._lock:
            seq = self._next_chunk.get(slot)
        if seq is None:
            seq = self._first_free(session_id, name)
        mark = secrets.token_hex(16)  # (one per append: a number found taken under it was taken by this append)
        for attempt in range(1, 2 * _APPEND_RETRIES + 1):
            key = self._chunk_key(session_id, name, seq)
            try:
                self._put(key, data, {"IfNoneMatch": "*", "Metadata": {_WRITE_MARK: mark}, **self._put_args()})
            except Exception as exc:
                if _error_code(exc) not in _CONFLICT_CODES:
                    raise StoreError(f"s3://{self.bucket}/{key}: cannot append: {exc}") from exc
                if self._written_by(key, mark):  # our own chunk, its answer lost and the PUT sent again
                    with self._lock:
                        self._next_chunk[slot] = seq + 1
                    return
                # Another writer took this number: the next one, or past everything after a few collisions.
                seq = self._first_free(session_id, name) if attempt % _APPEND_RETRIES == 0 else seq + 1
                continue
            with self._lock:
                self._next_chunk[slot] = seq + 1
            return
        raise StoreError(f"s3://{self.bucket}/{self._key(session_id, name)}: append kept colliding with other "
                         f"writers after {2 * _APPEND_RETRIES} tries")

    def _chunk_prefix(self, session_id: str, name: str) -> str:
        return f"{self._key(session_id)}{_CHUNKS}/{name}/"

    def _chunk_key(self, session_id: str, name: str, seq: int) -> str:
        return f"{self._chunk_prefix(session_id, name)}{seq:0{_SEQ_DIGITS}d}"

    def _chunk_keys(self, session_id: str, name: str) -> list[str]:
        prefix = self._chunk_prefix(session_id, name)
        keys, _ = self._list(prefix)
        return sorted(k for k in keys if _SEQ_RE.fullmatch(k[len(prefix):]))

    def _first_free(self, session_id: str, name: str) -> int:
        keys = self._chunk_keys(session_id, name)
        if not keys:
            return 0
        return int(keys[-1].rsplit("/", 1)[1]) + 1

    def _list(self, prefix: str, delimiter: str | None = None) -> tuple[list[str], list[str]]:
        keys: list[str] = []
        folders: list[str] = []
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        if delimiter:
            args["Delimiter"] = delimiter
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(**args):
                keys.extend(item["Key"] for item in page.get("Contents", ()))
                folders.extend(item["Prefix"] for item in page.get("CommonPrefixes", ()))
        except Exception as exc:
            raise StoreError(f"s3://{self.bucket}/{prefix}: cannot list: {exc}") from exc
        return keys, folders

    def names(self, session_id: str) -> list[str]:
        """The session's file names: its objects, and the names that only have appended chunks."""
        base = self._key(session_id)
        keys, _ = self._list(base)
        names = {k[len(base) :] for k in keys if "/" not in k[len(base) :]}
        chunked = f"{base}{_CHUNKS}/"
        names.update(k[len(chunked) :].split("/", 1)[0] for k in keys if k.startswith(chunked))
        return sorted(names)

    def sessions(self) -> list[str]:
        """Every session folder under the prefix."""
        base = f"{self.prefix}/" if self.prefix else ""
        _, folders = self._list(base, delimiter="/")
        return sorted(key for f in folders if _is_session_key(key := f[len(base) :].rstrip("/")))

    def close(self) -> None:
        """Close the client's connection pool."""
        close = getattr(self.client, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        return f"S3ArchiveStore(bucket={self.bucket!r}, prefix={self.prefix!r})"


def _is_session_key(name: str) -> bool:
    """Whether a folder under the prefix is named as a session's key (others' folders are no session of ours)."""
    try:
        validate_session_id(name)
    except ValueError:
        return False
    return True


def _make_client(endpoint_url: str | None, region: str | None, path_style: bool) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise MissingExtra("the S3 archive", "s3", module=exc.name) from None
    config = Config(s3={"addressing_style": "path" if path_style else "auto"})
    return boto3.client("s3", endpoint_url=endpoint_url, region_name=region, config=config)
