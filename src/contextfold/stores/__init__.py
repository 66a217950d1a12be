"""Storage backends, chosen by name and imported lazily.

``open_blob_store("memory")``, ``open_blob_store("local")`` (``.contextfold/`` under the working directory) and
``open_blob_store("local:///var/lib/agent/cache")`` build the tool output stores; nothing here imports a backend
before it is asked for.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..cache import BlobInfo, BlobStore
    from .local import LocalBlobStore
    from .memory import MemoryBlobStore

__all__ = ["BLOB_BACKENDS", "BlobInfo", "BlobStore", "LocalBlobStore", "MemoryBlobStore", "open_blob_store"]

# scheme -> "module:Class"; the class is built with the URL's path (or nothing). Third-party or optional backends
# (redis, …) are added here, so that naming one never imports the others.
BLOB_BACKENDS: dict[str, str] = {
    "memory": "contextfold.stores.memory:MemoryBlobStore",
    "local": "contextfold.stores.local:LocalBlobStore",
    "redis": "contextfold.stores.redis_blob:RedisBlobStore",
}

_LAZY: dict[str, str] = {
    "BlobInfo": "..cache.blobs",
    "BlobStore": "..cache.blobs",
    "LocalBlobStore": ".local",
    "MemoryBlobStore": ".memory",
}


def open_blob_store(url: str = "local") -> BlobStore:
    """Build the blob store that ``url`` names.

    Args:
        url: ``"memory"``, ``"local"`` (the default directory), or ``"local:///absolute/dir"`` /
            ``"local://relative/dir"``.

    Raises:
        ConfigError: for a scheme no backend is registered for, or a path given to ``memory``.
    """
    text = url.strip()
    scheme, _, rest = text.partition(":")
    target = BLOB_BACKENDS.get(scheme.lower())
    if target is None:
        raise ConfigError(
            f"unknown blob store {url!r}: use one of {', '.join(repr(s) for s in sorted(BLOB_BACKENDS))}",
            field="store",
        )
    path: str | None = None
    if rest:
        parts = urlsplit(text)
        path = unquote(parts.netloc + parts.path) or None
    module_name, _, class_name = target.partition(":")
    cls = getattr(import_module(module_name), class_name)
    if scheme.lower() == "redis":  # host, port, database and credentials all live in the URL itself
        return cls(text)  # type: ignore[no-any-return]
    if path is None:
        return cls()  # type: ignore[no-any-return]
    if scheme.lower() == "memory":
        raise ConfigError(f"the memory blob store takes no path, got {url!r}", field="store")
    return cls(path)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'contextfold.stores' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
