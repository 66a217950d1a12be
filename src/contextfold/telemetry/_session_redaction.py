"""Which redaction applies to a session's telemetry, for sinks that many sessions share.

A fleet worker's processor or one OTel exporter may carry the events of many sessions; each session's secrets are
known only to its own redactor (its memory, issue 21). Sinks keep the redactor each session gave, the most recent
``limit`` of them, and use the one they were built with for sessions that gave none.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeGuard, TypeVar

from .._exact import exact_key as _exact_key
from .._exact import exact_values

__all__ = ["SESSION_REDACTORS", "CleanPairs", "SessionRedaction", "exact_values", "own_ids", "own_item_redaction",
           "redacted_event", "unscanned"]

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


def redacted_event(redact: Callable[[dict[str, Any]], dict[str, Any]], record: dict[str, Any], *,
                   left: dict[str, str] | None = None) -> dict[str, Any]:
    """``redact(record)`` with the event's own ids as they were (a value in their place that is no id is redacted).

    A ``str``, ``int`` or ``float`` of a subclass is redacted as its exact type (see :func:`exact_values`). The span
    ids a rolled-back ``add()`` voids are ids of ours too, left out as its own are (see :func:`_voided_ids`).
    ``left``: :func:`unscanned` of ``record``, when the caller has it (its checks are not made twice).
    """
    voided = _voided_ids(record)
    if voided is None:
        return _redacted_event(redact, record, left)
    data = record["data"]
    redacted = _redacted_event(redact, {**record, "data": {key: value for key, value in data.items()
                                                           if key != _VOIDED_KEY}}, left)
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


def _redacted_event(redact: Callable[[dict[str, Any]], dict[str, Any]], record: dict[str, Any],
                    left: dict[str, str] | None) -> dict[str, Any]:
    # (unscanned(), when the caller has it, holds the own ids and the times)
    ids = own_ids(record) if left is None else {key: value for key, value in left.items() if key in _OWN_ID_KEYS}
    item = own_item_redaction(redact) if ids and type(record) is dict else None
    if item is not None:
        # Our redactor's redact_obj, item by item, without the ids it would scan only for them to be put back (issue
        # 22: ~a third of the telemetry thread's CPU per event) nor the times. The same dict, keys in the same order.
        left, figures = (unscanned(record, ids) if left is None else left), _FIGURES
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
    # (exact str first, without a call: three ids an event, every event, issue 22)
    found: dict[str, str] = {}
    for key in _OWN_ID_KEYS:
        value = record.get(key)
        if value is _checked_id[0] and value is not None:
            found[key] = value  # (the same string object as one found an id of ours: a session's trace id)
        elif (type(value) is str or _is_text(value)) and _HEX_ID.fullmatch(value):
            found[key] = value
            if key == "trace_id" and type(value) is str:
                _checked_id[0] = value
    return found


_UNMATCHED = object()  # (no record's value)

# The last trace id found to be one of ours (every event of a session carries the same string object). One slot,
# written and read whole under the GIL: at worst an id is checked again.
_checked_id: list[str | None] = [None]


def unscanned(record: Mapping[str, Any], ids: dict[str, str] | None = None) -> dict[str, str]:
    """What our redactor leaves out of an event: its own ids (``ids``, when known) and its times of our shape."""
    left = own_ids(record) if ids is None else dict(ids)
    if not left:
        return left  # (an event without ids of ours is redacted whole: see redacted_event)
    matched: Any = _UNMATCHED
    for key in _OWN_TIME_KEYS:
        value: Any = record.get(key)
        if value is matched or ((type(value) is str or _is_text(value)) and _OUR_TIME.fullmatch(value)):
            left[key] = value
            matched = value  # (an instantaneous event's end is its start's very string: checked once)
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


# Pairs a CleanPairs holds at most (emptied when full): a session's events repeat a few dozen names and values.
CLEAN_PAIRS_MAX = 4096
# Strings longer than this are not remembered (a summary's text, an error's message: they rarely come back).
CLEAN_VALUE_MAX_CHARS = 200


class CleanPairs:
    """The (key, string) items our redactor's item rule returned as they were, at one state of one redactor.

    A session's events repeat the same few strings call after call (an event's name and kind, the session id, the
    model, a token estimate's source: ~5 an event, two events a no-op ``prepare()``), and each went through the key
    rule, the prefilter's bulk clearing and a look-up in the redactor's clean strings (issue 22: ~half the telemetry
    thread's work per call). What our redactor makes of an item depends on the item and on its
    ``digest_state()`` only (the patterns are fixed; a callback, which could answer otherwise, keeps events off this
    path: see :func:`own_item_redaction`): an item it returned as it was at one state, it returns so at that state.
    The state only changes by learning a secret, which empties these pairs. Keys and values are exact ``str`` (a
    subclass's ``__hash__``/``__eq__`` could answer a look-up). Used by one thread (a processor's worker).
    """

    __slots__ = ("_pairs", "_redactor", "_state")

    def __init__(self) -> None:
        self._redactor: Any = None
        self._state: object = None
        self._pairs: set[tuple[str, str]] = set()

    def at_state(self, redact: Callable[[dict[str, Any]], dict[str, Any]]) -> set[tuple[str, str]]:
        """The pairs clean at the present state of ``redact``'s redactor (an own-item redaction's)."""
        redactor: Any = getattr(redact, "__self__", None)
        state = redactor.digest_state()
        if redactor is not self._redactor or state != self._state:
            self._redactor, self._state, self._pairs = redactor, state, set()
        return self._pairs

    def learn(self, redact: Callable[[dict[str, Any]], dict[str, Any]], record: dict[str, Any],
              redacted: dict[str, Any], left: Mapping[str, str]) -> None:
        """Remember the items of ``record`` that ``redacted``, its redaction since :meth:`at_state`, kept as they were.

        Kept means the same object: our redactor returns a string it found nothing in as itself. Only when the state
        is still the one :meth:`at_state` read: it only grows, so the redaction ran at that state from end to end.
        """
        redactor: Any = getattr(redact, "__self__", None)
        if redactor is not self._redactor or redactor.digest_state() != self._state:
            return  # (a secret was learned meanwhile: by this record's key rule, or on another thread)
        pairs = self._pairs
        if len(pairs) >= CLEAN_PAIRS_MAX:
            pairs.clear()
        _learn_kept(pairs, record, redacted, left)


def _learn_kept(pairs: set[tuple[str, str]], mapping: dict[str, Any], redacted: Any, skip: Mapping[str, str]) -> None:
    if type(redacted) is not dict:
        return
    for key, value in mapping.items():
        if type(key) is not str or key in skip:
            continue
        if type(value) is str:
            text: str = value
            if len(text) <= CLEAN_VALUE_MAX_CHARS and redacted.get(key) is text:
                pairs.add((key, text))
        elif type(value) is dict:
            _learn_kept(pairs, value, redacted.get(key), _NOTHING)


_NOTHING: Mapping[str, str] = MappingProxyType({})


def all_clean(mapping: dict[str, Any], pairs: set[tuple[str, str]], skip: Mapping[str, str]) -> bool:
    """Whether redacting ``mapping`` item by item (:func:`redacted_event`'s way) would give it back as it is.

    So when each of its items is a figure, one of ``skip`` (the event's own ids and times), an exact (key, string)
    pair of ``pairs``, or a plain dict of such items; anything else (a list, a subclass, a key that is no ``str``)
    answers False, and the event is redacted as before.
    """
    figures = _FIGURES
    for key, value in mapping.items():
        if type(key) is not str:
            return False  # (redaction writes it as its exact str: another key object)
        kind = type(value)
        if kind in figures:
            continue
        if kind is str:
            if (key, value) not in pairs and key not in skip:
                return False
        elif kind is not dict or not all_clean(value, pairs, _NOTHING):
            return False
    return True
