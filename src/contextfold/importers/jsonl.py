"""Message lists in any supported wire format: JSONL (one message or item per line) or a JSON array.

The wire format is auto-detected by :func:`contextfold.formats.detect_format` and decoded by that format's
``decode``, so every format the ``formats`` package learns is importable here without a change.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import InvalidHistory
from ..formats import detect_format, get_format
from ..formats._common import type_name
from ._session import RecordedSession, Source

__all__ = ["iter_jsonl_lines", "parse_messages"]

SOURCE: Source = "jsonl"


def iter_jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(1-based line number, line)`` for every non-blank line of a JSONL document."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield number, line


def parse_messages(items: Sequence[Any], *, session_id: str, format: str | None = None) -> RecordedSession:
    """Decode ``items`` (parsed JSON values, one per message/item) into a session.

    Args:
        items: The records, in order.
        session_id: The session's name (usually the file stem).
        format: The wire format, or None to detect it from the items.

    Raises:
        InvalidHistory: The items are not in a known format, or the format's decoder rejects one of them
            (``index`` is the record).
    """
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidHistory(f"expected a JSON object per record, got {type_name(item)}", index=index)
    if format is None:
        if not items:
            raise InvalidHistory("no messages in the file")
        format = detect_format(items)
    messages = get_format(format).decode(items)
    return RecordedSession(session_id, SOURCE, messages, format, {})
