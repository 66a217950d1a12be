"""Which redaction applies to a session's telemetry, for sinks that many sessions share.

A fleet worker's processor or one OTel exporter may carry the events of many sessions; each session's secrets are
known only to its own redactor (its memory, issue 21). Sinks keep the redactor each session gave, the most recent
``limit`` of them, and use the one they were built with for sessions that gave none.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeGuard, TypeVar

from .._exact import exact_key as _exact_key
from .._exact import exact_values

__all__ = ["SESSION_REDACTORS", "SessionRedaction", "exact_values", "own_ids", "own_item_redaction", "redacted_event",
           "unscanned"]

# Sessions whose redactor a shared sink remembers (a redactor is small; a worker serves fewer sessions at once).
SESSION_REDACTORS = 1024

R = TypeVar("R")

# The ids every event carries are contextfold's own (random hex, or a hash of the session id), never the user's text.
# Redacted, a span id that happened to be 16 decimal digits passing the Luhn check became "[REDACTED:card_number]":
# the exported event lost its id and the trace its nesting (about 1 span in 20,000).
_OWN_ID_KEYS = ("trace_id", "span_id", "parent_id")
_HEX_ID = re.compile(r"[0-9a-f]{16}|[0-9a-f]{32}")
# An event's times are ours too: the tracer's clock read when it was emitted, written by ``_clock.format_time``. Of
# that exact shape (digits and its fixed punctuation: no room for anything a user wrote) they say when, nothing of
# the session; the OpenTelemetry sink hands the same times on as numbers, never redacted. Our redactor leaves them
# out (issue 22); a user pattern or a remembered secret that happens to match one no longer cuts an event's time
# (nor tells, by which times it cut, what the secret's digits are).
_OWN_TIME_KEYS = ("started_at", "ended_at")
_OUR_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
# Where the redactor whose ``redact_obj`` a sink may take item by item lives (named, not imported: redact imports
# telemetry).
_REDACTOR_MODULE = "contextfold.redact._redactor"


def redacted_event(redact: Callable[[dict[str, Any]], dict[str, Any]], record: dict[str, Any]) -> dict[str, Any]:
    """``redact(record)`` with the event's own ids as they were (a value in their place that is no id is redacted).

    A ``str``, ``int`` or ``float`` of a subclass is redacted as its exact type (see :func:`exact_values`). The span
    ids a rolled-back ``add()`` voids are ids of ours too, left out as its own are (see :func:`_voided_ids`).
    """
    voided = _voided_ids(record)
    if voided is None:
        return _redacted_event(redact, record)
    data = record["data"]
    redacted = _redacted_event(redact, {**record, "data": {key: value for key, value in data.items()
                                                           if key != _VOIDED_KEY}})
    redacted_data = redacted.get("data")
    if type(redacted_data) is dict:  # (put back in its place among the event's figures)
        rebuilt = {key: voided if key == _VOIDED_KEY else redacted_data[key] for key in data
                   if key == _VOIDED_KEY or key in redacted_data}
        rebuilt.update((key, value) for key, value in redacted_data.items() if key not in rebuilt)
        redacted["data"] = rebuilt
    return redacted


# The event whose figures name span ids (AddRolledBack: named, not imported, as events.py names its events), and
# the figure holding them.
_VOIDED_EVENT = "compact.add_rolled_back"
_VOIDED_KEY = "voided"


def _voided_ids(record: Mapping[str, Any]) -> list[str] | tuple[str, ...] | None:
    """The span ids a rolled-back ``add()``'s event voids, when every one is an id of ours (hex of its length).

    Redacted, an id that happened to be 16 decimal digits passing the Luhn check became "[REDACTED:card_number]":
    the void no longer named the event it voids (review of lane S). Anything else there is redacted as before.
    """
    if record.get("name") != _VOIDED_EVENT:
        return None
    data = record.get("data")
    if type(data) is not dict:
        return None
    voided = data.get(_VOIDED_KEY)
    if (type(voided) is tuple or type(voided) is list) and voided and \
            all(type(span) is str and _HEX_ID.fullmatch(span) for span in voided):
        return voided
    return None


def _redacted_event(redact: Callable[[dict[str, Any]], dict[str, Any]], record: dict[str, Any]) -> dict[str, Any]:
    ids = own_ids(record)
    item = own_item_redaction(redact) if ids and type(record) is dict else None
    if item is not None:
        # Our redactor's redact_obj, item by item, without the ids it would scan only for them to be put back (issue
        # 22: ~a third of the telemetry thread's CPU per event) nor the times. The same dict, keys in the same order.
        left, figures = unscanned(record, ids), _FIGURES
        return {key if type(key) is str else _exact_key(key): value if key in left or type(value) in figures else
                _items_redacted(item, value) if type(value) is dict else
                item(key, value if type(value) is str else exact_values(value))
                for key, value in record.items()}
    redacted = redact(exact_values(record))
    if ids and isinstance(redacted, dict):
        redacted.update(ids)
    return redacted


# Values the key rule and redact_obj return as they are (an event's figures: most of its values).
_FIGURES: frozenset[type] = frozenset({int, float, bool, type(None)})


def _items_redacted(item: Callable[[str, Any], Any], mapping: dict[str, Any]) -> dict[str, Any]:
    """What our redactor's ``redact_obj`` makes of a plain dict: each item through the key rule, but its figures.

    Those come back as they are, without the calls (issue 22: a no-op prepare()'s two events carry ~20 figures).
    """
    figures = _FIGURES
    return {key if type(key) is str else _exact_key(key): value if type(value) in figures else
            _items_redacted(item, value) if type(value) is dict else
            item(key, value if type(value) is str else exact_values(value))
            for key, value in mapping.items()}


def _is_text(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a str by its type (its ``__class__`` can claim one)."""
    return issubclass(type(value), str)


def own_ids(record: Mapping[str, Any]) -> dict[str, str]:
    """The event's own ids (trace, span, parent) that are ids of ours: hex of their length."""
    return {key: value for key in _OWN_ID_KEYS
            if _is_text(value := record.get(key)) and _HEX_ID.fullmatch(value)}


def unscanned(record: Mapping[str, Any], ids: dict[str, str] | None = None) -> dict[str, str]:
    """What our redactor leaves out of an event: its own ids (``ids``, when known) and its times of our shape."""
    left = own_ids(record) if ids is None else dict(ids)
    if not left:
        return left  # (an event without ids of ours is redacted whole: see redacted_event)
    for key in _OWN_TIME_KEYS:
        if _is_text(value := record.get(key)) and _OUR_TIME.fullmatch(value):
            left[key] = value
    return left


def own_item_redaction(redact: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[str, Any], Any] | None:
    """What ``redact`` does to each item of a dict when it is a contextfold redactor's ``redact_obj``, else None.

    Only with nothing of the user's in the loop (enabled, no callback): then an item left out changes nothing of the
    others (no id's key names a secret, so none is learned). A user's own hook, or a redactor with a callback (a
    user's last pass over every redacted string), sees the whole event as before, ids included.
    """
    func = getattr(redact, "__func__", None)
    if getattr(func, "__qualname__", None) != "Redactor.redact_obj" or \
            getattr(func, "__module__", None) != _REDACTOR_MODULE:
        return None
    redactor = getattr(redact, "__self__", None)
    if not getattr(redactor, "enabled", False) or getattr(redactor, "callback", True) is not None:
        return None
    item: Callable[[str, Any], Any] | None = getattr(redactor, "_redact_item", None)
    return item


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
