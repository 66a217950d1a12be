"""Releasing what a ContextManager holds when it closes: threads, retention, store connections.

Each step runs even when an earlier one fails (a broken exporter must not keep the SQLite file open); the first
failure is raised at the end.
"""

from __future__ import annotations

from typing import Any

__all__ = ["release_resources"]


def release_resources(manager: Any) -> None:
    """Join exporter threads, run retention (the cache's if it stored anything, the archive's hourly), close stores."""
    cache = manager.cache
    steps: list[tuple[Any, str]] = [(manager.tracer.telemetry, "shutdown")]
    # Only a cache that stored something can have pushed the store past its caps; skipping the others keeps
    # opening and closing many short-lived managers cheap.
    if cache is not None and cache.retention is not None and cache.stored_outputs:
        steps.append((cache, "retain"))
    archive_store = getattr(manager.archive, "store", None)
    # (the redactor's kept results hold the session's messages and their redacted copies: a closed manager kept
    # every message it redacted, whole outputs included, as long as the caller held it)
    steps += [(manager.redactor, "forget_messages"), (cache, "close"), (archive_store, "prune_if_due"),
              (archive_store, "close")]
    first: Exception | None = None
    for target, name in steps:
        method = getattr(target, name, None)
        if not callable(method):
            continue
        try:
            method()
        except Exception as exc:  # keep releasing; report the first failure at the end
            first = first or exc
    if first is not None:
        raise first
