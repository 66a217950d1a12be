"""Human-readable event lines on a stream (stderr by default), one line per event.

Example line::

    2025-06-01T12:00:00.120Z compact.summary_created ok 40ms session=s1 strategy=extractive input_tokens=91234
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TextIO

from .base import BaseExporter, Batch

__all__ = ["MAX_VALUE_CHARS", "ConsoleExporter", "format_event"]

# A console line is read by a person: long values (a summary's text, a list of ids) are cut to this many
# characters so that one event stays on about one terminal line.
MAX_VALUE_CHARS = 80
_ELLIPSIS = "…"


def _short(value: Any, limit: int) -> str:
    if isinstance(value, str):
        text = value
        needs_quotes = not text or any(c.isspace() for c in text) or "=" in text
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        needs_quotes = False
    text = text.replace("\n", "\\n")
    if len(text) > limit:
        text = text[: limit - 1] + _ELLIPSIS
    return json.dumps(text, ensure_ascii=False) if needs_quotes else text


def _duration_ms(event: Mapping[str, Any]) -> str:
    try:
        start = datetime.fromisoformat(str(event["started_at"]))
        end = datetime.fromisoformat(str(event["ended_at"]))
    except (KeyError, ValueError):
        return ""
    millis = (end - start).total_seconds() * 1000
    return f" {millis:.0f}ms" if millis > 0 else ""


def format_event(event: Mapping[str, Any], *, max_value_chars: int = MAX_VALUE_CHARS) -> str:
    """Return one human-readable line for an event dict (no trailing newline)."""
    head = f"{event.get('started_at', '?')} {event.get('name', '?')} {event.get('status', 'ok')}{_duration_ms(event)}"
    fields = []
    if event.get("session_id"):
        fields.append(f"session={_short(event['session_id'], max_value_chars)}")
    data = event.get("data")
    if isinstance(data, Mapping):
        fields.extend(f"{key}={_short(value, max_value_chars)}" for key, value in data.items() if value is not None)
    return " ".join([head, *fields])


class ConsoleExporter(BaseExporter):
    """Writes each event as one line to ``stream`` (``sys.stderr`` when None, looked up at write time)."""

    def __init__(self, stream: TextIO | None = None, *, max_value_chars: int = MAX_VALUE_CHARS) -> None:
        self._stream = stream
        self._limit = max_value_chars
        self._lock = threading.Lock()

    def export(self, batch: Batch) -> None:
        """Write one line per event and flush the stream."""
        if not batch:
            return
        text = "".join(format_event(event, max_value_chars=self._limit) + "\n" for event in batch)
        stream = self._stream or sys.stderr
        with self._lock:
            stream.write(text)
            stream.flush()
