"""Typed event records: every decision contextfold makes, with the figures behind it.

Events are frozen, slotted dataclasses. Each has the common fields (``session_id``, ``trace_id``, ``span_id``,
``parent_id``, ``started_at``, ``ended_at``, ``status``) and its own typed fields, which :meth:`Event.to_dict`
puts under ``data``. The ``name`` of an event (``"compact.summary_created"``) is fixed by its class.

Events go to a :class:`Telemetry` sink (``emit(event)``). :class:`NullTelemetry` drops them,
:class:`RecordingTelemetry` keeps them in memory for tests, and :class:`contextfold.telemetry.BatchProcessor`
batches them to exporters on a background thread. :class:`contextfold.telemetry.Tracer` stamps ids and times.
The sinks live in :mod:`contextfold.telemetry` and the id and time helpers in :mod:`contextfold.telemetry._clock`;
both are re-exported here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TypeAlias

# Ids, times and the sinks live in their own modules; every name stays importable from here.
from ._clock import format_time, new_span_id, new_trace_id, parse_time, utc_now

__all__ = [
    "COMMON_FIELDS",
    "EVENT_TYPES",
    "STATUSES",
    "AddRolledBack",
    "CacheDecision",
    "CacheMasked",
    "CacheTruncated",
    "CompactError",
    "CompactWarning",
    "CustomEvent",
    "Event",
    "MessagesPruned",
    "PendingEvent",
    "RecoveryCircuitOpen",
    "RecoveryGaveUp",
    "RecoveryLimitLearned",
    "RecoveryOverflow",
    "RecoveryRetry",
    "SessionTrace",
    "SpanEvent",
    "Status",
    "SummaryCreated",
    "TokenEstimate",
    "TriggerDecision",
    "UsageRecorded",
    "event_from_dict",
]

Status: TypeAlias = Literal["ok", "error"]
STATUSES: frozenset[str] = frozenset({"ok", "error"})

COMMON_FIELDS: tuple[str, ...] = (
    "session_id",
    "trace_id",
    "span_id",
    "parent_id",
    "started_at",
    "ended_at",
    "status",
)


def _jsonable(value: Any) -> Any:
    """Turn the frozen containers events hold into plain JSON-friendly values."""
    kind = type(value)
    if kind is MappingProxyType or kind is dict:
        # (A span's attributes: mostly figures and names, passed by without a call and the ABC checks below, ~1 us
        # each on the telemetry thread; every prepare() closes a span, issue 22.)
        plain = _PLAIN
        return {k if type(k) is str else str(k): v if type(v) in plain else _jsonable(v) for k, v in value.items()}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list | frozenset | set):
        # A list of plain values (an event's ids: 100,000 after a bulk's first compaction) is checked and copied by
        # C loops, not converted item by item (issue 22: ~0.09 s of the telemetry thread's CPU).
        if all(map(_PLAIN.__contains__, map(type, value))):
            return list(value)
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return format_time(value)
    return value


# Values that are read-only already; most fields of most events are one of these (checked before the ABC look-up).
_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})


# Types _freeze keeps as they are without asking isinstance: an ABC check (Mapping) costs ~1 us on a masking turn's
# cold caches, and each span and event carries times (issue 22).
_KEPT: frozenset[type] = _PLAIN | {datetime, tuple, MappingProxyType, frozenset}


def _freeze(value: Any) -> Any:
    """Make containers read-only so that an emitted event cannot change while it waits in a queue."""
    kind = type(value)
    if kind in _KEPT:
        return value
    if kind is dict:
        # (Values kept as they are are not passed down: a span's attributes are mostly figures, one per prepare().)
        kept = _KEPT
        return MappingProxyType({k: v if type(v) in kept else _freeze(v) for k, v in value.items()})
    if isinstance(value, Mapping) and not isinstance(value, MappingProxyType):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def freeze_values(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with each container value replaced by a frozen copy, in place.

    What the caller changes later is not in the event built from them.
    """
    plain = _KEPT
    for name, value in fields.items():
        if type(value) not in plain:
            fields[name] = _freeze(value)
    return fields


# event class -> the names of its own fields (all but COMMON_FIELDS), read once per class: every event is frozen
# field by field as it is built, several times per prepare() (issue 22).
_OWN_FIELDS: dict[type, tuple[str, ...]] = {}


def _own_fields(cls: type) -> tuple[str, ...]:
    names = _OWN_FIELDS.get(cls)
    if names is None:
        names = _OWN_FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name not in COMMON_FIELDS)
    return names


class PendingEvent:
    """An event to build later, off the agent's thread: its class and its fields, the containers frozen now.

    Building an event (a frozen dataclass: every field set through ``object.__setattr__``, the values checked and
    frozen) cost 40-100 µs on a masking turn, where the caches are cold after the read-ahead ran; a turn emits four
    events and two spans (issue 22). A sink that exports on its own thread (:class:`~contextfold.telemetry.
    BatchProcessor`) takes a pending event instead (``emit_later``) and builds it there; the event is the one
    ``cls(**fields)`` gives now, as the containers among the fields are frozen copies taken when it was emitted.

    ``make``, when given, makes the rest of the fields where the event is built (a reason's text, figures read from
    a frozen verdict: :meth:`~contextfold.telemetry.Tracer.emit_deferred`); it reads only values that never change,
    so the event is the one its fields made at once give.
    """

    __slots__ = ("cls", "fields", "make")

    def __init__(self, cls: type[Event], fields: dict[str, Any], *, frozen: bool = False,
                 make: Callable[[], dict[str, Any]] | None = None) -> None:
        """``frozen``: the caller froze every value already (:func:`freeze_values`): they are not walked again."""
        if not frozen:
            freeze_values(fields)
        self.cls = cls
        self.fields = fields
        self.make = make

    def build(self) -> Event:
        """The event."""
        if self.make is None:
            return self.cls(**self.fields)
        return self.cls(**self.fields, **freeze_values(self.make()))


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """The common part of every event.

    Built bare, an event gets random ids and the current time; a :class:`~contextfold.telemetry.Tracer` stamps
    the session's trace id, a fresh span id, the enclosing span as parent and its clock's times.
    ``ended_at=None`` means an instantaneous event (it becomes ``started_at``).

    Raises:
        ValueError: when ``status`` is not ``"ok"``/``"error"``, a time is naive, or ``ended_at < started_at``.
    """

    NAME: ClassVar[str] = "event"
    DEFAULT_STATUS: ClassVar[Status] = "ok"

    session_id: str = ""
    trace_id: str = field(default_factory=new_trace_id)
    span_id: str = field(default_factory=new_span_id)
    parent_id: str | None = None
    started_at: datetime = field(default_factory=utc_now)
    ended_at: datetime | None = None
    status: Status | None = None

    def __post_init__(self) -> None:
        if self.status is None:
            object.__setattr__(self, "status", self.DEFAULT_STATUS)
        elif self.status not in STATUSES:
            raise ValueError(f"{self.NAME}: status: {self.status!r} is not one of 'ok', 'error'")
        started, ended = self.started_at, self.ended_at
        for name, moment in (("started_at", started), ("ended_at", ended)):
            if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
                raise ValueError(f"{self.NAME}: {name}: {moment!r} is not a timezone-aware datetime")
        if ended is None:
            object.__setattr__(self, "ended_at", started)
        elif ended is not started and ended < started:
            raise ValueError(
                f"{self.NAME}: ended_at: {format_time(ended)} is before started_at {format_time(started)}"
            )
        plain = _PLAIN
        for name in _own_fields(type(self)):
            value = getattr(self, name)
            if type(value) in plain:
                continue  # (most fields: no call made for them, several events per prepare(), issue 22)
            frozen = _freeze(value)
            if frozen is not value:
                object.__setattr__(self, name, frozen)

    @property
    def name(self) -> str:
        """The dotted event name, e.g. ``compact.summary_created``."""
        return self.NAME

    @property
    def kind(self) -> str:
        """The layer the event comes from: the part of the name before the first dot."""
        return self.name.split(".", 1)[0]

    @property
    def duration_s(self) -> float:
        """Seconds between start and end (0 for instantaneous events)."""
        end = self.ended_at or self.started_at
        return (end - self.started_at).total_seconds()

    def data(self) -> dict[str, Any]:
        """The event's own figures (everything but the common fields), JSON-friendly."""
        # (The class's own field names read once, not dataclasses.fields() per event: ~10 us an event on the
        # telemetry thread, two events per no-op prepare(), issue 22. Plain values are not passed to _jsonable.)
        plain = _PLAIN
        return {name: value if type(value := getattr(self, name)) in plain else _jsonable(value)
                for name in _own_fields(type(self))}

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-friendly dict: name, kind, the common fields and ``data``."""
        started, ended = self.started_at, self.ended_at
        started_text = format_time(started)
        return {
            "name": self.name,
            "kind": self.kind,
            "session_id": self.session_id,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_id": self.parent_id,
            "started_at": started_text,
            # (an instantaneous event's end is its start, the same object: written once)
            "ended_at": started_text if ended is None or ended is started else format_time(ended),
            "status": self.status,
            "data": self.data(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenEstimate(Event):
    """The token count of a view before a model call, broken down by where the tokens are."""

    NAME: ClassVar[str] = "compact.token_estimate"

    system: int
    developer: int
    tools_schema: int
    messages: int
    model: str | None = None
    context_window: int | None = None
    source: str = "estimate"

    @property
    def total(self) -> int:
        """All four parts added up."""
        return self.system + self.developer + self.tools_schema + self.messages

    @property
    def usage_pct(self) -> float | None:
        """The total as a percentage of the context window (None when the window is unknown)."""
        if not self.context_window:
            return None
        return round(100 * self.total / self.context_window, 1)

    def data(self) -> dict[str, Any]:
        """The breakdown plus the total and the share of the window, also under 004's names.

        004's schema has ``t_est`` (the total), ``max_tokens`` (the window) and a nested ``breakdown``; the flat
        layer fields stay for the readers built on them. ``usage_pct`` is a percentage (87.7), as its name says.
        """
        breakdown = {"system": self.system, "developer": self.developer, "tools_schema": self.tools_schema,
                     "messages": self.messages}
        total = self.total  # (once: one estimate per prepare(), issue 22; usage_pct as the property says)
        usage_pct = round(100 * total / self.context_window, 1) if self.context_window else None
        return {**Event.data(self), "total": total, "usage_pct": usage_pct, "t_est": total,
                "max_tokens": self.context_window, "breakdown": breakdown}


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerDecision(Event):
    """Whether compaction triggered before a call, why, and the policy figures behind the decision."""

    NAME: ClassVar[str] = "compact.trigger_decision"

    triggered: bool
    reason: str
    action: str = "none"
    tokens: int = 0
    threshold_tokens: int | None = None
    policy: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryCreated(Event):
    """A summary replaced part of the history; ``summary`` is the text itself."""

    NAME: ClassVar[str] = "compact.summary_created"

    strategy: str
    input_messages: int
    input_tokens: int
    summary_tokens: int
    summary: str = ""
    model: str | None = None
    summary_version: int | None = None

    @property
    def compression_ratio(self) -> float | None:
        """The summary's size as a share of its input, 004's figure (0.042: 4.2%); None without input."""
        if self.input_tokens <= 0:
            return None
        return round(self.summary_tokens / self.input_tokens, 4)

    @property
    def times_smaller(self) -> float | None:
        """How many times smaller the summary is than its input (None for an empty summary)."""
        if self.summary_tokens <= 0:
            return None
        return round(self.input_tokens / self.summary_tokens, 1)

    def data(self) -> dict[str, Any]:
        """The figures, the summary text, the compression ratio and how many times smaller the summary is."""
        return {**Event.data(self), "compression_ratio": self.compression_ratio, "times_smaller": self.times_smaller}


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagesPruned(Event):
    """Messages left the view (they stay in the archive); ``kept`` counts what stayed, per layer."""

    NAME: ClassVar[str] = "compact.pruned_messages"

    count: int
    ids: tuple[str, ...] = ()
    kept: Mapping[str, int | None] = field(default_factory=dict)
    # The pinned and protected messages that stayed, by id and label: the auditable memory layers (004 §4-5).
    protected: tuple[str, ...] = ()

    def data(self) -> dict[str, Any]:
        """The figures, with ``pruned_count`` (the seed name of ``count``)."""
        return {**Event.data(self), "pruned_count": self.count}


@dataclass(frozen=True, slots=True, kw_only=True)
class AddRolledBack(Event):
    """An ``add()`` taken back after its batch went in (an interrupt in its count or its check): none of it holds.

    ``ids``: the batch's messages as they were stored (none is in the history now); ``voided``: the span ids of the
    events the batch's commit sent before the rollback (a trigger decision, messages pruned by settling it), which no
    longer describe the history; ``error_type``: what interrupted it. The caller's retry sends its own events.
    """

    NAME: ClassVar[str] = "compact.add_rolled_back"
    DEFAULT_STATUS: ClassVar[Status] = "error"

    ids: tuple[str, ...] = ()
    voided: tuple[str, ...] = ()
    error_type: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactError(Event):
    """Compaction failed; ``fallback`` names what was done instead (None when nothing could be)."""

    NAME: ClassVar[str] = "compact.error"
    DEFAULT_STATUS: ClassVar[Status] = "error"

    error_type: str
    message: str
    fallback: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactWarning(Event):
    """Something an operator should know that is not an error (e.g. redaction disabled)."""

    NAME: ClassVar[str] = "compact.warning"

    message: str
    code: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheMasked(Event):
    """Old tool outputs were replaced by placeholders; their full text stays retrievable by ref."""

    NAME: ClassVar[str] = "cache.masked"

    count: int
    refs: tuple[str, ...] = ()
    tokens_freed: int = 0
    prefix_tokens_invalidated: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheDecision(Event):
    """Whether a rewrite of the history was worth the provider's prompt cache it invalidates (issue 25).

    The rewrite is a masking batch, a soft compaction, a wider answered output or putting one back (``action``:
    ``mask``, ``soft``, ``widen``, ``narrow``); the figures are in units of one fresh input token at ``pricing``'s
    rates.

    ``ttl`` is the lifetime of the prompt cache it was priced at (``"5m"``, ``"1h"``: Anthropic's write price and how
    long an idle cache is kept; the policy's ``prompt_cache_ttl`` until a usage report's cache writes say which),
    ``""`` for a provider's automatic cache (OpenAI's: no lifetime chosen).

    ``applied`` is False when it waits (the saving over ``horizon_turns`` does not pay the invalidation cost);
    ``forced`` when the view is over the hard threshold, which acts whatever the cost; ``replaces_forced`` when it
    acts in place of the rewrite the hard threshold would force within the session's expected turns (it frees enough
    to stay under hard for all of them: ``billing.economics.weigh_rewrite``).
    """

    NAME: ClassVar[str] = "compact.cache_decision"

    action: str
    applied: bool
    reason: str
    pricing: str = ""
    ttl: str = ""
    forced: bool = False
    tokens: int = 0
    tokens_freed: int = 0
    invalidated_tokens: int = 0
    expected_saving: float = 0.0
    invalidation_cost: float = 0.0
    horizon_turns: float = 0.0
    replaces_forced: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheTruncated(Event):
    """A tool output was truncated at write time; ``bytes`` is its full size, kept under ``ref``."""

    NAME: ClassVar[str] = "cache.truncated"

    ref: str
    bytes: int
    kept_bytes: int | None = None
    tool_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryOverflow(Event):
    """The provider rejected a request as too long."""

    NAME: ClassVar[str] = "recovery.overflow"
    DEFAULT_STATUS: ClassVar[Status] = "error"

    attempt: int
    message: str = ""
    prompt_tokens: int | None = None
    limit: int | None = None
    provider: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryRetry(Event):
    """Recovery shrank the view and retried."""

    NAME: ClassVar[str] = "recovery.retry"

    attempt: int
    action: str
    tokens_before: int | None = None
    tokens_after: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryGaveUp(Event):
    """Recovery stopped (retries exhausted, stall guard, nothing left to compact)."""

    NAME: ClassVar[str] = "recovery.gave_up"
    DEFAULT_STATUS: ClassVar[Status] = "error"

    attempts: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryCircuitOpen(Event):
    """Too many failures in a row: recovery is off until ``reset_after_s`` has passed."""

    NAME: ClassVar[str] = "recovery.circuit_open"
    DEFAULT_STATUS: ClassVar[Status] = "error"

    failures: int
    reason: str = ""
    reset_after_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryLimitLearned(Event):
    """A provider limit below the manager's thresholds was learned: the thresholds now follow it.

    ``tokens`` is the most the view and what the request carries beside it may take by our count; ``hard`` and
    ``window`` are the thresholds derived from it; ``provider_limit`` is the provider's own figure when the error
    gave one; ``source`` says where it came from (``error`` or ``store``).
    """

    NAME: ClassVar[str] = "recovery.limit_learned"

    tokens: int
    hard: int
    window: int
    previous: int | None = None
    provider_limit: int | None = None
    source: str = "error"


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryMediaLimit(Event):
    """The provider refused a request for its media (its size in bytes, or its images and documents).

    ``measure`` is ``bytes`` or ``items``; ``limit`` and ``sent`` are the provider's figures when the error gave them;
    ``max_bytes`` / ``max_items`` are the limits in force from now on, by our count of the media.
    """

    NAME: ClassVar[str] = "recovery.media_limit"
    DEFAULT_STATUS: ClassVar[Status] = "error"

    attempt: int
    measure: str
    message: str = ""
    limit: int | None = None
    sent: int | None = None
    max_bytes: int | None = None
    max_items: int | None = None
    provider: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaEvicted(Event):
    """The oldest images and documents left the view for a short text, to keep the request within media limits.

    ``count`` items went; ``bytes_before`` / ``bytes_after`` and ``items_before`` / ``items_after`` are the media
    of the view around it; ``max_bytes`` / ``max_items`` the limits in force. The originals are in the archive.
    """

    NAME: ClassVar[str] = "cache.media_evicted"

    count: int
    bytes_before: int
    bytes_after: int
    items_before: int
    items_after: int
    max_bytes: int | None = None
    max_items: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRecorded(Event):
    """The token counts a provider reported for one call, next to our estimate for the same view."""

    NAME: ClassVar[str] = "usage.recorded"

    input_tokens: int
    output_tokens: int
    model: str | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    estimated_input_tokens: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderContextReport(Event):
    """What a provider cleared or compacted on its side for one reply (``contextfold.provider_context``)."""

    NAME: ClassVar[str] = "provider.context"

    api: str
    mode: str = ""
    cleared_tool_uses: int = 0
    cleared_thinking_turns: int = 0
    cleared_input_tokens: int = 0
    compactions: int = 0
    compaction_input_tokens: int = 0
    compaction_output_tokens: int = 0
    context_tokens: int | None = None
    paused: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderItemDropped(Event):
    """Parts another provider's API cannot read were left out of a request (never sent, kept in the history)."""

    NAME: ClassVar[str] = "provider.item_dropped"

    format: str
    count: int
    kinds: Mapping[str, int] = field(default_factory=dict)
    origins: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomEvent(Event):
    """An event with a caller-chosen name and free-form data (spans recorded by the tracer use it)."""

    NAME: ClassVar[str] = "custom"

    event: str
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The caller-chosen name."""
        return self.event

    def data(self) -> dict[str, Any]:
        """The attributes as given."""
        data = _jsonable(self.attributes)
        return data if type(data) is dict else dict(data)  # (a dict made for this call already: not copied again)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanEvent(CustomEvent):
    """A span that had a duration (a model call, a compaction, a summarization), emitted when it closed.

    ``span_kind`` says what sort of work it was (``llm.call``, ``compact``, ``summarize``, ``cache``, ``archive``);
    trace viewers use it for icons and filters.
    """

    span_kind: str = ""

    @property
    def kind(self) -> str:
        """The span's kind, or the part of its name before the first dot."""
        return self.span_kind or self.event.split(".", 1)[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionTrace(Event):
    """The session as a whole: what a trace viewer names, groups and times the trace by.

    Emitted when the session starts (``finished`` false, ``ended_at`` = ``started_at``) and again from
    ``finish()`` with the session's start and the end time. ``metadata`` holds the agent, model, window and
    policy figures; ``noop_decisions`` counts the trigger decisions that did nothing and were not exported.
    """

    NAME: ClassVar[str] = "session.trace"

    title: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    finished: bool = False
    noop_decisions: int = 0


EVENT_TYPES: Mapping[str, type[Event]] = MappingProxyType(
    {
        cls.NAME: cls
        for cls in (
            TokenEstimate,
            TriggerDecision,
            SummaryCreated,
            MessagesPruned,
            AddRolledBack,
            CompactError,
            CompactWarning,
            CacheDecision,
            CacheMasked,
            CacheTruncated,
            RecoveryOverflow,
            RecoveryRetry,
            RecoveryGaveUp,
            RecoveryCircuitOpen,
            RecoveryLimitLearned,
            RecoveryMediaLimit,
            MediaEvicted,
            UsageRecorded,
            SessionTrace,
            ProviderContextReport,
            ProviderItemDropped,
        )
    }
)

# The event classes of this module. Their records (to_dict) are new dicts down to their leaves, made from frozen values,
# so a sink may pass one on as it is (see BatchProcessor). A caller's subclass may make its record its own way (a dict
# it keeps, and changes after the event was exported), so no record of one is taken as made here.
OWN_EVENT_CLASSES: frozenset[type[Event]] = frozenset({Event, CustomEvent, SpanEvent, *EVENT_TYPES.values()})

# Figures that to_dict() derives; event_from_dict() must not pass them back to the constructor.
_DERIVED = frozenset({"total", "compression_ratio", "times_smaller", "usage_pct", "pruned_count", "t_est", "max_tokens",
                      "breakdown"})


def event_from_dict(item: Mapping[str, Any]) -> Event:
    """Rebuild an event from :meth:`Event.to_dict` output (names it does not know become :class:`CustomEvent`).

    Raises:
        ValueError: naming the field that is missing or malformed.
    """
    for key in ("name", "trace_id", "span_id", "started_at"):
        if not isinstance(item.get(key), str):
            raise ValueError(f"event: {key}: missing or not a string")
    data = item.get("data") or {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{item['name']}: data: must be an object, got {type(data).__name__}")
    common: dict[str, Any] = {
        "session_id": item.get("session_id") or "",
        "trace_id": item["trace_id"],
        "span_id": item["span_id"],
        "parent_id": item.get("parent_id"),
        "started_at": parse_time(item["started_at"], field_name="started_at"),
        "ended_at": parse_time(item["ended_at"], field_name="ended_at") if item.get("ended_at") else None,
        "status": item.get("status"),
    }
    cls = EVENT_TYPES.get(item["name"])
    if cls is None:
        kind = item.get("kind")
        if isinstance(kind, str) and kind and kind != item["name"].split(".", 1)[0]:
            return SpanEvent(event=item["name"], attributes=dict(data), span_kind=kind, **common)
        return CustomEvent(event=item["name"], attributes=dict(data), **common)
    own = {f.name for f in dataclasses.fields(cls)} - set(COMMON_FIELDS)
    unknown = set(data) - own - _DERIVED
    if unknown:
        raise ValueError(f"{item['name']}: data: unknown field(s) {sorted(unknown)}")
    kwargs: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in own}
    try:
        return cls(**common, **kwargs)
    except TypeError as exc:
        raise ValueError(f"{item['name']}: data: {exc}") from None
