"""Replay one recorded session through a :class:`~contextfold.manager.ContextManager` and measure every turn.

For each assistant message of the recording, in order: the messages before it (since the previous turn) are added,
``prepare()`` builds the view the model would have received, the view is measured (tokens, validity in the wire
format, cost, retention), and then the assistant message itself is added. Recordings carry no provider usage, so
``record_usage`` is never called: the counts are the manager's own.

Each view is billed with prompt caching counted (:mod:`contextfold.billing`) at the reference providers' rates and
at the replay model's own, and so is the unmanaged history of the same turn (every message so far, as recorded),
calls ``call_interval_s`` apart.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..answered import answered_in_view
from ..billing import DEFAULT_CALL_INTERVAL_S, Block, SessionMeter, blocks_of, reference_rates
from ..errors import ContextfoldError
from ..formats import get_format
from ..importers._session import RecordedSession
from ..messages import Message
from ..telemetry import AddRolledBack, Event, RecordingTelemetry, SessionTrace, SpanEvent, SummaryCreated
from .metrics import (
    MAX_MISSING_LISTED,
    TurnMetrics,
    bill_entry,
    contains_fact,
    is_number_fact,
    message_search_text,
    refs_in,
    session_totals,
    turn_entities,
)

__all__ = [
    "DEFAULT_MODEL",
    "ReplayOptions",
    "SessionReplayer",
    "dump_path",
    "manager_session_id",
    "replay_session",
    "voided_span_ids",
]

DEFAULT_MODEL = "gpt-4o"
# A token estimate is emitted before every call; the per-turn series already has those figures, so the event table
# leaves them out and counts them.
_OMITTED_EVENTS = frozenset({"compact.token_estimate"})
# Event table cells: long texts (summaries have their own section) and id lists are cut to keep the JSON small.
MAX_EVENT_TEXT = 300
MAX_EVENT_LIST = 10
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How to replay: the model and window simulated, the policy, and where to put views, outputs and archives.

    Args:
        model: The model whose tokenizer counts and whose prices cost the calls.
        window: The simulated context window (None: the model's own).
        policy: Policy fields (a mapping, so that options pickle across processes); None for the defaults.
        summarizer: ``"extractive"`` (no LLM) or a provider name such as ``"openai:gpt-4o-mini"``.
        format: The wire format views are built and validated in (None: each session's own).
        dump_views: A directory to write every view to as JSONL (see :func:`dump_path`), redacted unless
            ``redact`` is off.
        store: The tool output store (``"memory"``, ``"local"``, ``"local:///dir"``, ``"redis://…"``).
        archive: The archive (a directory, ``s3://…``); None keeps it in memory.
        redact: Redact secrets in archived transcripts and events (the library default). Restoring a history
            from a redacted archive gives the redacted text back for messages that only the archive holds.
        telemetry: Exporter names (``ariadne:URL``, ``otel``, ``jsonl:PATH``, …) every replayed session's events
            also go to, so that a recorded session can be watched in a trace viewer.
        call_interval_s: Seconds between two model calls when billing with prompt caching (recordings carry no
            times); it decides only when an unused cache entry expires.
    """

    model: str = DEFAULT_MODEL
    window: int | None = None
    policy: Mapping[str, Any] | None = None
    summarizer: str = "extractive"
    format: str | None = None
    dump_views: str | None = None
    store: str = "memory"
    archive: str | None = None
    redact: bool = True
    telemetry: tuple[str, ...] = ()
    call_interval_s: float = DEFAULT_CALL_INTERVAL_S

    def settings(self) -> dict[str, Any]:
        """The options as they appear at the top of the replay JSON."""
        return {
            "model": self.model,
            "window": self.window,
            "format": self.format,
            "summarizer": self.summarizer,
            "policy": dict(self.policy) if self.policy else {},
            "call_interval_s": self.call_interval_s,
        }


# Where the replay's clock starts (recordings carry no times; any fixed instant keeps runs reproducible).
_CLOCK_START = datetime(2026, 1, 1, tzinfo=UTC)


def manager_session_id(session_id: str) -> str:
    """The id the manager, its archive and its blobs use for a recorded session: one per recorded id.

    A plain id (letters, digits, ``.``, ``_``, ``-``) is itself, so its archive stays where earlier runs wrote it.
    Any other (tau-bench's ``<file>/<task>-<trial>``) is kept as it is too: the archive stores it under its reversible
    encoding (:func:`contextfold.archive.archive_key`: ``_`` then ``_XX`` escapes), which no plain id can be.
    Replacing the ``/`` by ``_`` made ``f/1-0`` and ``f_1-0`` one session: one archive, one set of blobs. An id
    too long to encode is named by a readable cut and a hash of the whole id (:func:`_hashed_session_id`).
    """
    from ..archive import archive_key

    try:
        archive_key(session_id)
    except ValueError:
        return _hashed_session_id(session_id)
    return session_id


# Characters an id named by its hash keeps of the original: those the archive key keeps as they are (one each).
_HASHED_ID_KEPT = re.compile(r"[^A-Za-z0-9.-]")
_HASHED_ID_CUT = 120


def _hashed_session_id(session_id: str) -> str:
    """``<readable cut>~<16 hex of sha256>``: the ``~`` makes it no plain id, the hash tells long ids apart."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{_HASHED_ID_KEPT.sub('-', session_id)[:_HASHED_ID_CUT]}~{digest}"


def _message_id_prefix(session_id: str) -> str:
    """The prefix of the replay's message ids: the sanitised id as before (message ids show in the views)."""
    safe = _UNSAFE_ID_CHARS.sub("_", session_id).lstrip("._-")
    return safe[:200] or "session"


def dump_path(root: str | Path, session_id: str, turn: int) -> Path:
    """``root/<session>/<turn>.jsonl``; a ``/`` in the session id makes nested folders (as ``convert --out-dir``).

    Each component is named as the archive names a session (:func:`~contextfold.archive.archive_key`): a plain one
    (letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit) as it is, any other ``_`` followed by its
    UTF-8 bytes outside ``[A-Za-z0-9.-]`` written ``_XX``; an empty one is ``_``, one too long to encode a readable
    cut and a hash. Distinct ids get distinct paths ("f 1-0" and "f_1-0", "a//b" and "a/_/b" shared one before), and
    no component is ``.`` or ``..``, so no id can escape ``root``.
    """
    return Path(root, *(_path_component(piece) for piece in session_id.split("/")), f"{turn}.jsonl")


def _path_component(piece: str) -> str:
    from ..archive import archive_key

    if not piece:
        return "_"  # (an encoded component has a character after its "_")
    try:
        return archive_key(piece)
    except ValueError:  # too long once encoded, or a lone surrogate: "~" is in no plain or encoded name
        return _hashed_session_id(piece)


def _archive(archive: str | None, redact: bool) -> Any:
    from ..archive import Archive, MemoryArchiveStore
    from ..redact import Redactor
    from ..stores.archive_open import open_archive_store

    store = MemoryArchiveStore() if archive is None else open_archive_store(archive)
    # Built here rather than by the manager: an Archive given no redactor applies the built-in patterns, so
    # ``redact=False`` must be spelled out as a disabled Redactor to reach the archive.
    return Archive(store, redactor=Redactor(enabled=redact))


def _cut(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= MAX_EVENT_TEXT else value[:MAX_EVENT_TEXT] + f"… ({len(value)} chars)"
    if isinstance(value, list | tuple):
        items = [_cut(v) for v in value[:MAX_EVENT_LIST]]
        return [*items, f"… ({len(value)} items)"] if len(value) > MAX_EVENT_LIST else items
    if isinstance(value, Mapping):
        return {str(k): _cut(v) for k, v in value.items()}
    return value


@dataclass
class _State:
    """What the replay carries from one turn to the next."""

    added: int = 0
    raw_tokens: int = 0
    sent: int = 0
    sent_baseline: int = 0
    boundary: int | None = None  # messages added when the latest compaction happened
    last_seen: dict[str, int] = field(default_factory=dict)  # entity -> index of the last message holding it
    outputs: dict[str, str] = field(default_factory=dict)  # ref -> full cached output
    # the unmanaged history's messages added since its last request, as blocks (the history only grows: each request
    # is billed as the previous one plus these, in time proportional to them)
    raw_pending: list[Block] = field(default_factory=list)
    # the last view's messages, by identity, with their block figures (the next view shares most of them)
    view_blocks: dict[int, tuple[Message, str, int, int]] = field(default_factory=dict)


class SessionReplayer:
    """Replays one session; keeps the manager, so that tests can inspect its archive and cache afterwards."""

    def __init__(self, session: RecordedSession, options: ReplayOptions | None = None) -> None:
        from ..manager import ContextManager

        self.session = session
        self.options = options or ReplayOptions()
        self.format = self.options.format or session.format
        self.wire = get_format(self.format)
        self.telemetry = RecordingTelemetry()
        self._call = 0  # the model calls made so far: the replay's clock reads call_interval_s per call
        self.manager = ContextManager(
            self.options.model,
            max_context_tokens=self.options.window,
            policy=dict(self.options.policy) if self.options.policy else None,
            summarizer=self.options.summarizer,
            store=self.options.store,
            archive=_archive(self.options.archive, self.options.redact),
            telemetry=[self.telemetry, *self.options.telemetry] if self.options.telemetry else self.telemetry,
            session_id=manager_session_id(session.id),
            redact=self.options.redact,
            # one replay owns its session: fixed ids keep the figures and events reproducible
            message_id_prefix=f"{_message_id_prefix(session.id)}:replay",
            # the calls' spacing the bills assume, so that cache decisions see the same (an idle cache expires)
            clock=self._now,
        )
        # The figures are token counts: they must be exact from the first turn, never the byte upper bounds a
        # lazy counter gives while its tokenizer loads (those would make a run's figures depend on load timing).
        self.manager.counter.wait_exact()
        # The views and the unmanaged history, billed at the reference providers' rates and at the model's own.
        # The model's are those its cache decisions weigh (the policy's prompt_cache_ttl and cache_pricing): a bill at
        # the 5-minute cache under a 1-hour policy said each call after a pause rewrote the view the decisions kept.
        rates = {**reference_rates(), "model": self.manager._economics.rates}
        # contextfold's views carry the marks its Anthropic client puts (billing.breakpoints); the unmanaged
        # history, a client's usual two: after the pinned head and on the last block.
        self._meter = SessionMeter(rates, self.options.call_interval_s, breakpoints="marked")
        self._unmanaged_meter = SessionMeter(rates, self.options.call_interval_s)
        self._state = _State()
        self._event_turns: list[tuple[int, int]] = []  # (first event index, turn)
        self._tau = session.source == "tau_bench"
        system = next((m for m in session.messages if m.role == "system"), None)
        self._policy_text = system.text if system is not None and self._tau else ""

    def _now(self) -> datetime:
        """The replay's clock: the recording's calls ``call_interval_s`` apart, from a fixed start."""
        return _CLOCK_START + timedelta(seconds=self._call * self.options.call_interval_s)

    # -- running ------------------------------------------------------------------------------------------------
    def run(self, on_turn: Callable[[TurnMetrics], None] | None = None) -> dict[str, Any]:
        """Replay every turn; returns the session's result (``series``, ``totals``, events, summaries)."""
        series: list[dict[str, Any]] = []
        for index, message in enumerate(self.session.messages):
            if message.role != "assistant":
                continue
            self._event_turns.append((len(self.telemetry), index))
            metrics = self._turn(index, message)
            series.append(metrics.to_dict())
            if on_turn is not None:
                on_turn(metrics)
        # What follows the last assistant turn (its tool results) is part of the session and of its archive.
        self._advance(len(self.session.messages))
        return self._result(series)

    def _advance(self, upto: int) -> None:
        """Add the recorded messages before ``upto`` that the manager has not seen yet."""
        st = self._state
        pending = self.session.messages[st.added : upto]
        if not pending:
            return
        count = self.manager.counter.count_message
        st.raw_pending.extend(blocks_of(pending, count))
        for offset, m in enumerate(pending):
            st.raw_tokens += count(m)
            for entity in turn_entities(m):
                st.last_seen[entity] = st.added + offset
        self.manager.add(pending)
        st.added = upto

    def _turn(self, index: int, answer: Message) -> TurnMetrics:
        st = self._state
        cm = self.manager
        self._advance(index)
        compactions_before = cm.compactions
        output_tokens = cm.counter.count_message(answer)
        error: str | None = None
        started = time.perf_counter()
        sent: Any = None
        try:
            sent = cm.prepare(format=self.format)
        except ContextfoldError as exc:
            error = f"{type(exc).__name__}: {exc}"
        elapsed_ms = (time.perf_counter() - started) * 1000
        if error is not None:
            self._advance(index + 1)  # the recorded answer joins the history
            return TurnMetrics(
                turn=index, raw_tokens=st.raw_tokens, view_tokens=0, view_messages=0, maskings=cm.maskings,
                compactions=cm.compactions, prepare_ms=elapsed_ms, valid=False, error=error, tokens_sent=st.sent,
                tokens_sent_baseline=st.sent_baseline, cached_tokens=0, output_tokens=output_tokens,
                cost_usd=None, cost_usd_cached=None, cost_usd_baseline=None, cost_usd_baseline_cached=None,
            )
        if cm.compactions > compactions_before:
            st.boundary = index
        view = cm.messages()
        # Chat and Responses views are the item list itself; Anthropic and Gemini return a request body with the
        # system text hoisted, so their views are checked and dumped in the JSONL form (system as an item).
        items: list[dict[str, Any]] = sent if isinstance(sent, list) else self.wire.encode(view)
        valid, error = self._validate(items)
        if self.options.dump_views:
            self._dump(index, items)
        view_tokens = cm.tokens()
        st.sent += view_tokens
        st.sent_baseline += st.raw_tokens
        blocks = blocks_of(view, cm.counter.count_message, marks=cm.breakpoint_indices(), memo=st.view_blocks)
        st.view_blocks = {id(m): st.view_blocks[id(m)] for m in view}  # only this view's messages stay remembered
        rest = view_tokens - sum(b.tokens for b in blocks)
        if rest > 0:  # tool schemas, reply priming, the provider's grounding: sent after the messages, never cached
            blocks.append(Block(f"rest:{rest}", rest))
        bills = self._meter.request(blocks)
        self._call += 1
        unmanaged = self._unmanaged_meter.extend(st.raw_pending)
        st.raw_pending = []
        output_cost = cm.model.cost(output=output_tokens)
        model_bill, model_unmanaged = bills["model"], unmanaged["model"]

        def with_output(input_usd: float | None) -> float | None:
            return None if input_usd is None or output_cost is None else input_usd + output_cost

        metrics = TurnMetrics(
            turn=index, raw_tokens=st.raw_tokens, view_tokens=view_tokens, view_messages=len(view),
            maskings=cm.maskings, compactions=cm.compactions, prepare_ms=elapsed_ms, valid=valid, error=error,
            tokens_sent=st.sent, tokens_sent_baseline=st.sent_baseline, cached_tokens=model_bill.cache_read,
            output_tokens=output_tokens, cost_usd=cm.model.cost(input=view_tokens, output=output_tokens),
            cost_usd_cached=with_output(model_bill.usd),
            cost_usd_baseline=cm.model.cost(input=st.raw_tokens, output=output_tokens),
            cost_usd_baseline_cached=with_output(model_unmanaged.usd),
            bill={name: bill_entry(b) for name, b in bills.items() if name != "model"},
            bill_unmanaged={name: bill_entry(b) for name, b in unmanaged.items() if name != "model"},
        )
        self._retention(metrics, index, answer, view)
        self._advance(index + 1)  # the recorded answer joins the history
        return metrics

    def _validate(self, items: list[dict[str, Any]]) -> tuple[bool, str | None]:
        try:
            self.wire.validate(items)
        except (ContextfoldError, ValueError) as exc:
            return False, f"{type(exc).__name__}: {exc}"
        return True, None

    def _dump(self, index: int, items: list[dict[str, Any]]) -> None:
        assert self.options.dump_views is not None
        path = dump_path(self.options.dump_views, self.session.id, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        # A dump leaves the process like the replay's other outputs: the session's secrets redacted (``redact``).
        dumped = self.manager.redact_outgoing(items) if self.options.redact else items
        text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in dumped)
        path.write_text(text, encoding="utf-8")

    # -- retention ----------------------------------------------------------------------------------------------
    def _retention(self, metrics: TurnMetrics, index: int, answer: Message, view: list[Message]) -> None:
        st = self._state
        view_text = "\n".join(message_search_text(m) for m in view)
        needed = sorted(e for e in turn_entities(answer) if e in st.last_seen)
        if needed:
            outputs = self._outputs(refs_in(view_text, view))
            in_view = [e for e in needed if contains_fact(view_text, e)]
            recoverable = set(in_view) | {e for e in needed if e not in in_view and contains_fact(outputs, e)}
            metrics.needed, metrics.in_view, metrics.recoverable = len(needed), len(in_view), len(recoverable)
            metrics.needed_numbers = sum(1 for e in needed if is_number_fact(e))
            metrics.numbers_in_view = sum(1 for e in in_view if is_number_fact(e))
            metrics.missing = tuple(e for e in needed if e not in recoverable)[:MAX_MISSING_LISTED]
            if st.boundary is not None:
                old = [e for e in needed if st.last_seen[e] < st.boundary]
                metrics.compacted_needed = len(old)
                metrics.compacted_recoverable = sum(1 for e in old if e in recoverable)
        history = self.session.messages[:index]
        if any(m.role in ("user", "tool") for m in history):
            metrics.answered_in_view = answered_in_view(history, view)
        if self._tau:
            metrics.policy_in_view = bool(self._policy_text) and self._policy_text in view_text
            users = [m.text for m in self.session.messages[:index] if m.role == "user" and m.text]
            metrics.user_messages = len(users)
            metrics.user_messages_in_view = sum(1 for text in users if text in view_text)

    def _outputs(self, refs: set[str]) -> str:
        """The full cached outputs of ``refs``, joined (a NUL between them, so no entity spans two)."""
        cache = self.manager.cache
        if cache is None:
            return ""
        texts = []
        for ref in sorted(refs):
            text = self._state.outputs.get(ref)
            if text is None:
                try:
                    text = cache.get(ref)
                except ContextfoldError:
                    text = ""
                self._state.outputs[ref] = text
            texts.append(text)
        return "\0".join(texts)

    # -- the result ---------------------------------------------------------------------------------------------
    def _turn_of(self, event_index: int) -> int | None:
        """The turn of the last entry whose first event index is at most ``event_index`` (None before the first).

        A binary search: the entries are appended in event order, and walking them for every event took
        events x turns / 2 steps (0.73 s of a 3,000-turn session's result).
        """
        at = bisect.bisect_right(self._event_turns, event_index, key=_first_event)
        return self._event_turns[at - 1][1] if at else None

    def _result(self, series: list[dict[str, Any]]) -> dict[str, Any]:
        events: list[dict[str, Any]] = []
        summaries: list[dict[str, Any]] = []
        omitted = 0
        recorded = self.telemetry.events
        voided = voided_span_ids(recorded)
        for n, event in enumerate(recorded):
            if event.span_id in voided:
                continue  # sent by an add() taken back: the retry's own events say what happened
            turn = self._turn_of(n)
            if isinstance(event, SummaryCreated):
                summaries.append(_summary_entry(event, turn))
            if event.name in _OMITTED_EVENTS:
                omitted += 1
                continue
            if isinstance(event, SpanEvent | SessionTrace):
                continue  # when work happened, not what changed: the report does not list spans
            events.append(_event_entry(event, turn))
        b = self.manager.budgets
        result = {
            "id": self.session.id,
            "source": self.session.source,
            "format": self.format,
            "messages": len(self.session.messages),
            "manager_session_id": self.manager.session_id,
            "thresholds": {"window": b.window, "hard": b.hard, "soft": b.soft,
                           "tool_output_budget": b.tool_output_budget},
            "series": series,
            "totals": session_totals(series),
            "events": events,
            "events_omitted": omitted,
            "noop_decisions": self.manager.tracer.noop_decisions,
            "summaries": summaries,
            "error": None,
        }
        return self._redacted(result)

    def _redacted(self, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` as it may leave the process: the session's secrets (and personal data) redacted.

        The figures name what the turns mentioned (missing facts, summaries, event payloads): the session's
        redactor, which has learned every secret of the session by now, redacts them like any other telemetry.
        """
        redacted: dict[str, Any] = self.manager.redact_outgoing(result)
        return redacted


def voided_span_ids(events: Iterable[Event]) -> frozenset[str]:
    """The span ids of ``events`` that no longer hold: those a rolled-back ``add()`` names (``AddRolledBack.voided``).

    An ``add()`` interrupted after its batch went in (its count, its check) is taken back whole, but what its commit
    sent stays sent: a trigger decision for a batch the history does not hold, messages pruned from a view it put
    back. Counted, they told of one more decision (or pruning) than the session made; the caller's retry sends its
    own. The ``AddRolledBack`` itself holds: it says the add failed.
    """
    voided: set[str] = set()
    for event in events:
        if type(event) is AddRolledBack:
            voided.update(event.voided)
    return frozenset(voided)


def _first_event(entry: tuple[int, int]) -> int:
    return entry[0]


def _event_entry(event: Event, turn: int | None) -> dict[str, Any]:
    data = event.data()
    if isinstance(event, SummaryCreated):
        data["summary"] = f"({len(event.summary)} chars: see the summaries)"
    return {"turn": turn, "name": event.name, "status": event.status, "data": _cut(data)}


def _summary_entry(event: SummaryCreated, turn: int | None) -> dict[str, Any]:
    return {
        "turn": turn,
        "strategy": event.strategy,
        "input_messages": event.input_messages,
        "input_tokens": event.input_tokens,
        "summary_tokens": event.summary_tokens,
        "summary": event.summary,
    }


def replay_session(session: RecordedSession, options: ReplayOptions | None = None, *,
                   on_turn: Callable[[TurnMetrics], None] | None = None) -> dict[str, Any]:
    """Replay ``session`` and return its result (see :meth:`SessionReplayer.run`); the manager is closed after."""
    replayer = SessionReplayer(session, options)
    try:
        return replayer.run(on_turn)
    finally:
        replayer.manager.close()
