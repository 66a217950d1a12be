"""The S3 archive: the filesystem layout as object keys, ``{prefix}/{session_id}/{name}``.

Works with AWS and S3-compatible servers (MinIO, Ceph, moto): give ``endpoint_url`` and, for servers without
virtual-host buckets, ``path_style=True``. ``sse_kms_key_id`` encrypts every object with that KMS key.

A PUT is atomic in S3, so whole files need nothing more. ``exclusive`` writes use ``If-None-Match: *`` and appends
use ``If-Match: <etag>``, retried on a conflict, so two workers never overwrite each other's lines.
Needs ``pip install 'contextfold[s3]'``.
"""

from __future__ import annotations

import re
from typing import Any

from ..archive import validate_session_id
from ..errors import MissingExtra, StoreError

__all__ = ["S3ArchiveStore"]

# Conditional appends retry when another writer got in between; a handful of tries covers real contention.
_APPEND_RETRIES = 8
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,199}$")
_CONFLICT_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "412", "409"})
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

    def _key(self, session_id: str, name: str = "") -> str:
        validate_session_id(session_id)
        if name and not _NAME_RE.match(name):
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
        if exclusive:
            args["IfNoneMatch"] = "*"
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, **args)
        except Exception as exc:
            if exclusive and _error_code(exc) in _CONFLICT_CODES:
                raise FileExistsError(f"s3://{self.bucket}/{key} exists") from None
            raise StoreError(f"s3://{self.bucket}/{key}: cannot write: {exc}") from exc

    def _get(self, key: str) -> tuple[bytes, str] | None:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _error_code(exc) in _MISSING_CODES:
                return None
            raise StoreError(f"s3://{self.bucket}/{key}: cannot read: {exc}") from exc
        return response["Body"].read(), str(response.get("ETag", ""))

    def read(self, session_id: str, name: str) -> bytes | None:
        """The object's bytes, or None when there is no such key."""
        found = self._get(self._key(session_id, name))
        return None if found is None else found[0]

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Read, extend and conditionally re-PUT the object (S3 has no append), retrying on a concurrent change."""
        key = self._key(session_id, name)
        for _ in range(_APPEND_RETRIES):
            found = self._get(key)
            args = self._put_args()
            if found is None:
                body, args["IfNoneMatch"] = data, "*"
            else:
                body, args["IfMatch"] = found[0] + data, found[1]
            try:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=body, **args)
                return
            except Exception as exc:
                if _error_code(exc) not in _CONFLICT_CODES:
                    raise StoreError(f"s3://{self.bucket}/{key}: cannot append: {exc}") from exc
        raise StoreError(f"s3://{self.bucket}/{key}: append kept conflicting after {_APPEND_RETRIES} tries")

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
        """The session's object names (the part of each key after the session folder)."""
        base = self._key(session_id)
        keys, _ = self._list(base)
        return sorted(k[len(base) :] for k in keys if "/" not in k[len(base) :])

    def sessions(self) -> list[str]:
        """Every session folder under the prefix."""
        base = f"{self.prefix}/" if self.prefix else ""
        _, folders = self._list(base, delimiter="/")
        return sorted(f[len(base) :].rstrip("/") for f in folders)

    def close(self) -> None:
        """Close the client's connection pool."""
        close = getattr(self.client, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        return f"S3ArchiveStore(bucket={self.bucket!r}, prefix={self.prefix!r})"


def _make_client(endpoint_url: str | None, region: str | None, path_style: bool) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise MissingExtra("the S3 archive", "s3", module=exc.name) from None
    config = Config(s3={"addressing_style": "path" if path_style else "auto"})
    return boto3.client("s3", endpoint_url=endpoint_url, region_name=region, config=config)
