"""Everything that left the view, kept: pre-compaction transcripts, summaries and the event log of each session.

Contract: :class:`Archive` writes through an :class:`ArchiveStore` (write, read, append, names, sessions) and gives
the original history back with :meth:`Archive.restore_history`; secrets are redacted before anything is written.
Any non-empty session id up to :data:`MAX_ARCHIVE_KEY_CHARS` encoded characters is stored (:func:`archive_key`
encodes e-mail addresses, ``org:42`` and the like reversibly; stores only ever see names that stay in their folder).
The agent's ``history_search`` tool reads the same files (:mod:`contextfold.archive._archive.search`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._archive import (
        BOOKKEEPING_META,
        DEFAULT_KEEP_META,
        EVENTS_NAME,
        MAX_ARCHIVE_KEY_CHARS,
        PARTS_META,
        SYNTHETIC_KINDS,
        Archive,
        ArchiveStore,
        MemoryArchiveStore,
        archive_key,
        event_line,
        merge_histories,
        parts_skeleton,
        session_from_key,
        summary_name,
        transcript_name,
        validate_session_id,
        with_layout,
    )

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "Archive": "._archive",
    "ArchiveStore": "._archive",
    "BOOKKEEPING_META": "._archive",
    "DEFAULT_KEEP_META": "._archive",
    "EVENTS_NAME": "._archive",
    "MAX_ARCHIVE_KEY_CHARS": "._archive",
    "MemoryArchiveStore": "._archive",
    "PARTS_META": "._archive",
    "SYNTHETIC_KINDS": "._archive",
    "archive_key": "._archive",
    "event_line": "._archive",
    "merge_histories": "._archive",
    "parts_skeleton": "._archive",
    "session_from_key": "._archive",
    "with_layout": "._archive",
    "summary_name": "._archive",
    "transcript_name": "._archive",
    "validate_session_id": "._archive",
}
__all__ = [
    "BOOKKEEPING_META", "DEFAULT_KEEP_META", "EVENTS_NAME", "MAX_ARCHIVE_KEY_CHARS", "PARTS_META", "SYNTHETIC_KINDS",
    "Archive", "ArchiveStore", "MemoryArchiveStore", "archive_key", "event_line", "merge_histories", "parts_skeleton",
    "session_from_key", "summary_name", "transcript_name", "validate_session_id", "with_layout",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
