"""Ids and timestamps for events: W3C-sized random trace and span ids, and UTC times as ISO-8601.

Used by :mod:`contextfold.telemetry.events` (event defaults, ``to_dict``) and :mod:`contextfold.telemetry.tracer`.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

__all__ = ["format_time", "new_span_id", "new_trace_id", "parse_time", "utc_now"]

# W3C trace-context sizes (16-byte trace id, 8-byte span id) so that ids map one to one onto OpenTelemetry's.
_TRACE_ID_BYTES = 16
_SPAN_ID_BYTES = 8


def new_trace_id() -> str:
    """Return a random 32-hex-digit trace id."""
    return secrets.token_hex(_TRACE_ID_BYTES)


def new_span_id() -> str:
    """Return a random 16-hex-digit span id."""
    return secrets.token_hex(_SPAN_ID_BYTES)


def utc_now() -> datetime:
    """Return the current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """Return ``moment`` as ISO-8601 in UTC with microseconds and a ``Z`` suffix."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(text: str, *, field_name: str = "time") -> datetime:
    """Parse an ISO-8601 timestamp; naive times are read as UTC.

    Raises:
        ValueError: naming ``field_name`` when the text is not ISO-8601.
    """
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValueError(f"{field_name}: {text!r} is not an ISO-8601 timestamp") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
