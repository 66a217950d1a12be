"""A fleet of agent workers: any worker runs any turn of any session; soft compaction runs in the background.

Shared state lives in stores every worker reaches: the session (the stored view) in a :class:`SessionStore` with
optimistic concurrency and marks (Redis), full tool outputs in a shared blob store (Redis), the archive in a shared
archive store (S3). A worker holds nothing between turns, so it may die at any moment.

One turn (:meth:`FleetWorker.turn`): load the session, add the turn's input messages, ``prepare()`` the view for
the model, add the model's reply, and save with the version that was loaded and the mark ``turn``. Saving against
a version that moved on (:class:`SessionConflict`) or a lost connection redoes the whole turn from a fresh load;
a turn whose mark is already saved (the worker that ran it died before answering) is not applied again. Turns of
one session come one after another (the next input depends on the reply), so what a failed attempt archived
before dying (a transcript of the loaded view plus the turn's inputs) is a prefix of the history and restores in
order.

Soft compaction (:meth:`FleetWorker.compact`) runs on whichever worker takes the job from the queue: it loads the
session, compacts, and saves with the version it loaded, so its result is applied only if no turn landed
meanwhile; otherwise it is dropped (counted) and the next turn queues it again. Two workers compacting one
version cannot both win the save: a session is never compacted twice over.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .archive import Archive, event_line
from .errors import CorruptRecord, StoreError
from .messages import Message
from .stores.session import SessionConflict, SessionState

if TYPE_CHECKING:
    from .manager import ContextManager
    from .tokens import MessageCounter

__all__ = [
    "TURN_MARK",
    "CompactionOutcome",
    "FleetWorker",
    "MarkedSessionStore",
    "SessionEventsExporter",
    "TurnResult",
]

# The mark saved with every turn: the number of the last turn applied to the session.
TURN_MARK = "turn"
# Digits of a stored turn mark: more turns than any session will hold; a longer mark was written by someone else.
MAX_TURN_DIGITS = 20
# Attempts of one turn or compaction before the error goes to the caller: conflicts need one retry each in
# practice, and a Redis restart takes a few hundred milliseconds to come back from.
MAX_ATTEMPTS = 12
# Backoff after a lost connection: doubles from this, capped below, so that a restarting Redis is not hammered.
RETRY_BACKOFF_S = 0.05
RETRY_BACKOFF_MAX_S = 1.0


class MarkedSessionStore(Protocol):
    """A :class:`SessionStore` that also saves marks atomically with the messages (Redis, memory)."""

    def load_state(self, session_id: str) -> SessionState:
        """Messages, version and marks."""
        ...

    def save(self, session_id: str, messages: Sequence[Message], expected_version: int, *,
             marks: Mapping[str, str] | None = None) -> int:
        """Save if still at ``expected_version``; raises SessionConflict otherwise."""
        ...


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What one turn did.

    Attributes:
        view: What was sent to the model (the ``format`` encoding), or None for a turn already applied.
        version: The session's version after the turn.
        attempts: Tries it took (1 without conflicts or lost connections).
        conflicts: Saves refused because the session moved on (another worker's compaction, a retried turn).
        store_errors: Attempts lost to a store error (a lost connection, a restarting server).
        duplicate: The turn had been applied already (by a worker that died before answering); nothing was done.
        soft_due: The view is over the soft threshold: queue a background compaction.
        prepare_ms: Time of the ``prepare()`` call of the successful attempt.
        turn_ms: Time of the whole turn, loads and saves of every attempt included.
    """

    view: Any
    version: int
    attempts: int
    conflicts: int
    store_errors: int
    duplicate: bool
    soft_due: bool
    prepare_ms: float
    turn_ms: float


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """What a background compaction did: ``applied``, ``discarded`` (the session moved on) or nothing to do."""

    applied: bool
    discarded: bool
    version: int
    tokens_before: int = 0
    tokens_after: int = 0


class SessionEventsExporter:
    """Appends a batch of events of many sessions to each session's ``events.jsonl`` (one append per session)."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive

    def export(self, batch: Sequence[Mapping[str, Any]]) -> None:
        """Group by ``session_id`` and append (events are already redacted by the processor)."""
        by_session: dict[str, list[str]] = defaultdict(list)
        for event in batch:
            session = event.get("session_id")
            if isinstance(session, str) and session:
                by_session[session].append(event_line(event))
        for session, lines in by_session.items():
            self.archive.append_event_lines(session, lines)

    def shutdown(self) -> None:
        """Nothing to release: the archive belongs to the worker."""


class FleetWorker:
    """Runs turns and background compactions of any session against shared stores.

    Args:
        sessions: The shared session store (``RedisSessionStore``; ``MemorySessionStore`` in one process).
        blobs: The shared tool output store (``RedisBlobStore``).
        archive: The shared archive (an :class:`Archive` over ``S3ArchiveStore``).
        model: The model the agents call.
        max_context_tokens: Its window, when not the registry's.
        policy: A Policy or a mapping of its fields.
        counter: A MessageCounter shared by every manager of this worker (its cache survives between turns).
        telemetry: Where the managers' events go (one sink for all sessions, e.g. a BatchProcessor over
            :class:`SessionEventsExporter`).
        format: The wire format views are prepared in.
        redact: Redact the archive and events (see ContextManager).
        sleep: How to wait between attempts after a lost connection (``time.sleep``).
    """

    def __init__(
        self,
        sessions: MarkedSessionStore,
        *,
        blobs: Any,
        archive: Archive,
        model: str = "gpt-4o",
        max_context_tokens: int | None = None,
        policy: Any = None,
        counter: MessageCounter | None = None,
        telemetry: Any = None,
        format: str = "openai_chat",
        redact: Any = True,
        summarizer: Any = "extractive",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        from .tokens import counter_for_model

        self.sessions = sessions
        self.blobs = blobs
        self.archive = archive
        self.model = model
        self.max_context_tokens = max_context_tokens
        self.policy = policy
        self.counter = counter if counter is not None else counter_for_model(model)
        self.telemetry = telemetry
        self.format = format
        self.redact = redact
        self.summarizer = summarizer
        self._sleep = sleep

    def manager(self, session_id: str, stored: Sequence[Message] = ()) -> ContextManager:
        """A manager for one step of ``session_id``, continuing from its ``stored`` messages."""
        from .manager import ContextManager

        cm = ContextManager(
            self.model, max_context_tokens=self.max_context_tokens, policy=self.policy, store=self.blobs,
            archive=self.archive, telemetry=self.telemetry, session_id=session_id, redact=self.redact,
            summarizer=self.summarizer, counter=self.counter, archive_events=False, defer_soft=True,
        )
        if stored:
            cm.adopt(stored)
        return cm

    # -- turns --------------------------------------------------------------------------------------------------------
    def turn(self, session_id: str, number: int, inputs: Sequence[Message | Mapping[str, Any]],
             reply: Sequence[Message | Mapping[str, Any]] = ()) -> TurnResult:
        """Apply turn ``number`` (1, 2, …) of ``session_id``: its ``inputs``, the view, the model's ``reply``.

        Give every message a stable ``meta["id"]`` (the same on a retry), so that the archive restores each once.

        Raises:
            StoreError: the stores stayed unreachable for every attempt.
            ValueError: ``number`` is not after the last turn applied plus one.
        """
        from .compaction import Action

        started = time.perf_counter()
        conflicts = errors = 0
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                state = self.sessions.load_state(session_id)
                done = _turns_done(session_id, state.marks)
                if number <= done:
                    return TurnResult(None, state.version, attempt, conflicts, errors, True, False, 0.0,
                                      _ms(started))
                if number != done + 1:
                    raise ValueError(f"turn: session {session_id!r} is at turn {done}, got turn {number}")
                cm = self.manager(session_id, state.messages)
                cm.add(list(inputs))
                t0 = time.perf_counter()
                view = cm.prepare(self.format)
                prepare_ms = _ms(t0)
                soft_due = cm.last_plan is not None and cm.last_plan.action is Action.SOFT
                if reply:
                    cm.add(list(reply))
                version = self.sessions.save(session_id, cm.stored_messages(), state.version,
                                             marks={TURN_MARK: str(number)})
                return TurnResult(view, version, attempt, conflicts, errors, False, soft_due, prepare_ms,
                                  _ms(started))
            except SessionConflict:
                conflicts += 1
            except CorruptRecord:
                raise  # (a record no worker wrote stays as it is: waiting for it to heal only delays the report)
            except StoreError:
                errors += 1
                if attempt == MAX_ATTEMPTS:
                    raise
                self._backoff(errors)
        raise StoreError(f"session {session_id!r}: turn {number} kept conflicting after {MAX_ATTEMPTS} attempts")

    # -- background compaction ----------------------------------------------------------------------------------------
    def compact(self, session_id: str) -> CompactionOutcome:
        """Soft-compact the session as it is now; applied only if no other save landed meanwhile.

        Raises:
            StoreError: the stores stayed unreachable for every attempt.
        """
        errors = 0
        while True:
            try:
                state = self.sessions.load_state(session_id)
                break
            except CorruptRecord:
                raise
            except StoreError:
                errors += 1
                if errors >= MAX_ATTEMPTS:
                    raise
                self._backoff(errors)
        cm = self.manager(session_id, state.messages)
        report = cm.compact(force=False, kind="soft")
        if report.compacted == 0:
            return CompactionOutcome(False, False, state.version, report.tokens_before, report.tokens_after)
        try:
            version = self.sessions.save(session_id, cm.stored_messages(), state.version)
        except (SessionConflict, StoreError):
            # A turn landed (or the save's fate is unknown after a lost connection): drop this result. The
            # transcript it archived is a prefix of the history, so nothing is lost or repeated either way.
            return CompactionOutcome(False, True, state.version, report.tokens_before, report.tokens_after)
        return CompactionOutcome(True, False, version, report.tokens_before, report.tokens_after)

    # -- the end of a session -----------------------------------------------------------------------------------------
    def finish(self, session_id: str) -> int:
        """Archive the session's stored view, so that the archive alone restores the whole session; its number."""
        state = self.sessions.load_state(session_id)
        return int(self.manager(session_id, state.messages).archive_view() or 0)

    def restore(self, session_id: str, *, keep_meta: Sequence[str] | None = None) -> list[Message]:
        """The session's original history from the archive alone, tool outputs resolved from the shared blobs."""
        from .cache import ToolOutputCache

        cache = ToolOutputCache(self.blobs)
        return self.archive.restore_history(session_id, (), resolve_ref=cache.get, keep_meta=keep_meta)

    def _backoff(self, failures: int) -> None:
        self._sleep(min(RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S * 2 ** (failures - 1)))


def _turns_done(session_id: str, marks: Mapping[str, str]) -> int:
    """The session's turn mark as a number, or StoreError: a mark that is no turn number was not saved by us."""
    raw = marks.get(TURN_MARK, "0")
    if not (isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= MAX_TURN_DIGITS):
        raise CorruptRecord(f"session {session_id!r}: its stored mark {TURN_MARK!r} is {raw!r:.60}, no turn number "
                         "(not saved by a fleet worker)")
    return int(raw)


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000
