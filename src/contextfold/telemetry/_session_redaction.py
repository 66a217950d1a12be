"""Which redaction applies to a session's telemetry, for sinks that many sessions share.

A fleet worker's processor or one OTel exporter may carry the events of many sessions; each session's secrets are
known only to its own redactor (its memory, issue 21). Sinks keep the redactor each session gave, the most recent
``limit`` of them, and use the one they were built with for sessions that gave none.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["SESSION_REDACTORS", "SessionRedaction", "redacted_event"]

# Sessions whose redactor a shared sink remembers (a redactor is small; a worker serves fewer sessions at once).
SESSION_REDACTORS = 1024

R = TypeVar("R")

# The ids every event carries are contextfold's own (random hex, or a hash of the session id), never the user's text.
# Redacted, a span id that happened to be 16 decimal digits passing the Luhn check became "[REDACTED:card_number]":
# the exported event lost its id and the trace its nesting (about 1 span in 20,000).
_OWN_ID_KEYS = ("trace_id", "span_id", "parent_id")
_HEX_ID = re.compile(r"[0-9a-f]{16}|[0-9a-f]{32}")


def redacted_event(redact: Callable[[dict[str, Any]], dict[str, Any]], record: dict[str, Any]) -> dict[str, Any]:
    """``redact(record)`` with the event's own ids as they were (a value in their place that is no id is redacted)."""
    ids = {key: value for key in _OWN_ID_KEYS
           if isinstance(value := record.get(key), str) and _HEX_ID.fullmatch(value)}
    redacted = redact(record)
    if ids and isinstance(redacted, dict):
        redacted.update(ids)
    return redacted


class SessionRedaction(Generic[R]):
    """The redaction of each session that gave one, and a default for the others. Not locked: its owner locks."""

    def __init__(self, default: R | None, limit: int = SESSION_REDACTORS) -> None:
        self.default = default
        self.limit = limit
        self._by_session: OrderedDict[str, R] = OrderedDict()

    def register(self, redact: R, session_id: str | None) -> None:
        """``session_id``'s redaction from now on; without a session, the default (when the sink had none)."""
        if session_id is None:
            if self.default is None:
                self.default = redact
            return
        self._by_session[session_id] = redact
        self._by_session.move_to_end(session_id)
        while len(self._by_session) > self.limit:
            self._by_session.popitem(last=False)

    def for_session(self, session_id: object) -> R | None:
        """The redaction of the session a record belongs to (``record["session_id"]``), or the default."""
        if self._by_session:
            found = self._by_session.get(str(session_id))
            if found is not None:
                return found
        return self.default

    def has_sessions(self) -> bool:
        """Whether any session gave its own (a sink with none need not look at a record's session)."""
        return bool(self._by_session)
