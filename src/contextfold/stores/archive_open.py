"""``open_archive_store(url)``: an archive store by URL, importing only the backend that is named.

``/var/lib/agent/archive`` or ``file:///var/lib/agent/archive`` (a directory), and
``s3://bucket/prefix?endpoint_url=http://127.0.0.1:9000&path_style=true&region=eu-west-1&sse_kms_key_id=alias/x``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..archive import ArchiveStore

__all__ = ["open_archive_store"]

_S3_OPTIONS = frozenset({"endpoint_url", "region", "path_style", "sse_kms_key_id", "sse"})
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _s3_options(query: str, url: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key, values in parse_qs(query, keep_blank_values=True).items():
        if key not in _S3_OPTIONS:
            raise ConfigError(
                f"unknown option {key!r} in {url!r} (expected {', '.join(sorted(_S3_OPTIONS))})", field="archive"
            )
        value = values[-1]
        if key == "path_style":
            if value.lower() not in _TRUE | _FALSE:
                raise ConfigError(f"path_style must be true or false, got {value!r}", field="archive")
            options[key] = value.lower() in _TRUE
        else:
            options[key] = value or None
    return options


def open_archive_store(url: str) -> ArchiveStore:
    """Build the archive store that ``url`` names (a path, ``file://…`` or ``s3://bucket/prefix?options``).

    Raises:
        ConfigError: for an unknown scheme or option, or an S3 URL without a bucket.
        MissingExtra: for ``s3://`` when boto3 is not installed.
    """
    text = url.strip()
    if not text:
        raise ConfigError("must not be empty", field="archive")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    # A single letter before ':' is a Windows drive, not a scheme.
    if scheme in ("", "file") or len(scheme) == 1:
        from .archive_fs import FilesystemArchiveStore

        path = unquote(parts.netloc + parts.path) if scheme == "file" else text
        if not path:
            raise ConfigError(f"no directory in {url!r}", field="archive")
        return FilesystemArchiveStore(path)
    if scheme == "s3":
        if not parts.netloc:
            raise ConfigError(f"no bucket in {url!r} (expected s3://bucket/prefix)", field="archive")
        from .archive_s3 import S3ArchiveStore

        return S3ArchiveStore(parts.netloc, unquote(parts.path), **_s3_options(parts.query, url))
    raise ConfigError(f"unknown archive {url!r}: use a directory, file:///dir or s3://bucket/prefix", field="archive")
