"""The sessions behind the proxy: stores shared by every request (and every instance), and one request's turn.

A request's turn (:func:`open_turn`) follows the fleet's (``contextfold.fleet``): load the session with its
version and marks, ``adopt()`` it into a fresh manager, feed it what the request brings that the session has not
seen, ``prepare()`` the view, and save with the version loaded. A save refused because another request (on this
instance or another) saved meanwhile redoes the whole step from a fresh load; nothing is sent upstream before the
save succeeded, so an instance killed at any point leaves either the old state or the new one, and the client's
retry finds what is left to do.

What was fed is recorded as marks saved atomically with the view:

- ``keys``: identity keys of the client's history items fed so far (:func:`~contextfold.serve.apis.item_key`),
  restored into ``cm.framework_history`` so that :func:`contextfold.manager.reconcile.reconcile` feeds only what is
  new, or rebuilds the view (archiving the old one) when the client's history diverged.
- ``head``, ``pending``, ``fed``: for Responses requests that continue a response (``previous_response_id``) or
  a ``conversation``, where the client does not send the history: the last response id, its reply items (fed at
  the next request, before its input), and which continuation was fed last (a retried request is fed once).

A session named by the conversation's opening (no header, no handle) is the first conversation of the caller that
opened so; another that opens alike and then parts from it (agents of one team: one key, one system prompt, one task
template) is a session of its own, a *fork* named by the items up to where it parted (:func:`follow_forks`). One
session per opening made the two rebuild each other's view on every request and answer one's retrieval tools from
the other's outputs and archive.

Message ids are derived from the session, the version loaded and the items fed (``message_id_prefix``): a request
retried after its instance died mid-request gives the same messages the same ids, so the archive restores each once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CorruptRecord, StoreError
from ..formats._common import json_problem
from ..stores._records import stored_count
from ..stores.session import SessionConflict, SessionState
from .apis import INSTRUCTIONS_ID, BadRequest, Conflict, Exchange, item_key
from .config import ServeConfig
from .leases import LEASE_MARGIN_S, lease_key, lease_store
from .ops import log_event
from .provenance import MIN_SLIDE_OVERLAP, SOURCES_MARK, Sources, decode_traced, message_id, slide_of

if TYPE_CHECKING:
    from ..archive import Archive
    from ..fleet import MarkedSessionStore
    from ..manager import ContextManager
    from ..tokens import MessageCounter

__all__ = ["MAX_ATTEMPTS", "MAX_FORK_HOPS", "MAX_SLIDE_PROBES", "SOURCE", "Backend", "Conflict", "Turn",
           "add_round", "continuation_tag", "follow_forks", "open_turn", "own_round", "resolve_pointer", "restore",
           "save_reply", "session_marks"]

# The framework-history source of the proxy's clients (manager/reconcile.py).
SOURCE = "serve"
# Attempts of one turn before the request fails: a conflict needs one redo in practice; a restarting Redis a few.
MAX_ATTEMPTS = 8
# Forks followed from an opening's session to the one a request belongs to: each hop is a conversation that parted
# from the previous one's record; a bound keeps a request's loads few whatever clients do.
MAX_FORK_HOPS = 16
# A request whose opening is new is looked up as a slid window of the session whose newest fed item it holds: its
# newest items are probed for that, at most this many (a turn adds a reply and its tool results, rarely more).
MAX_SLIDE_PROBES = 16
# Sessions past their age are deleted when the proxy starts and then at most this often (one SQL delete).
PRUNE_INTERVAL_S = 3600.0
# Message counters kept at once, least recently used dropped (Backend.counter): a few models per deployment.
MAX_COUNTERS = 32
# The mark naming the messages of the latest continuation's own input, and its item count (serve._failed_try).
FED_INPUT_MARK = "fed_input"
# The mark of when the session last claimed again the outputs its view cites (_refresh_claims).
CLAIMS_MARK = "claims_at"
# Hex digits of the part of a message id that tells two requests' items apart.
_ID_DIGEST_HEX = 10


@dataclass
class Backend:
    """The stores every request shares: sessions (with marks), tool outputs, archive; counters by model.

    Args:
        config: The proxy's settings.
        telemetry: Where every manager's events go (the proxy's metrics sink).
    """

    config: ServeConfig
    telemetry: Any = None
    # Wall-clock seconds: when a continuation's lease expires (serve.leases; a test moves it on).
    clock: Callable[[], float] = field(default_factory=lambda: time.time)
    sessions: MarkedSessionStore = field(init=False)
    blobs: Any = field(init=False)
    leases: Any = field(init=False)  # (the blob store, or its keys with a time to live: serve.leases.lease_store)
    archive: Archive = field(init=False)
    _counters: OrderedDict[str, MessageCounter] = field(init=False, default_factory=OrderedDict)
    _counters_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _pruned_at: float = field(init=False, default=float("-inf"))
    _collected_at: float = field(init=False, default=float("-inf"))
    _collecting: threading.Thread | None = field(init=False, default=None)
    _collect_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        from ..archive import Archive
        from ..stores import open_blob_store
        from ..stores.archive_open import open_archive_store

        state = Path(self.config.state_dir or ".contextfold")
        self.sessions = open_session_store(self.config.sessions, state, self.config.session_max_age_s)
        store = self.config.store
        self.blobs = open_blob_store(f"local://{state.resolve()}" if store == "local" else store)
        self.leases = lease_store(self.blobs, self.config.upstream_timeout_s + LEASE_MARGIN_S)
        # (after the blob store: a pruned session's lease goes with it. Not collected here: a backend a test or the CLI
        # makes read every key of the store on a thread, and its close waited for it; the first turn starts it.)
        self.prune_sessions(collect=False)
        archive = self.config.archive
        if archive == "memory":
            from ..archive import MemoryArchiveStore

            archive_store: Any = MemoryArchiveStore()
        else:
            archive_store = open_archive_store(archive or str(state / "archive"))
        self.archive = Archive(archive_store, redactor=self.config.redactor(enabled=self.config.redact))

    def prune_sessions(self, now: float | None = None, *, collect: bool = True) -> list[str]:
        """Delete the sessions past ``session_max_age_s`` and collect what sessions left in the blob store; their ids.

        Each at most once per ``PRUNE_INTERVAL_S`` unless ``now`` is given. The local store's sessions are pruned here
        (a Redis session expires on its own); the blob store is collected by :meth:`collect_blobs` (unless
        ``collect`` is False), at ``now`` here when it is given, otherwise on a thread of its own (it reads every key:
        no request waits for it).
        """
        max_age = self.config.session_max_age_s
        clock = time.time()
        pruned: list[str] = []
        if now is not None or clock - self._pruned_at >= PRUNE_INTERVAL_S:
            self._pruned_at = clock
            prune = getattr(self.sessions, "prune", None)
            pruned = list(prune(max_age, now=now)) if callable(prune) and max_age is not None else []
            self._drop_leases(pruned)
        if now is not None:
            self.collect_blobs(now)
        elif collect and clock - self._collected_at >= PRUNE_INTERVAL_S and \
                (self._collecting is None or not self._collecting.is_alive()):
            self._collected_at = clock
            self._collecting = threading.Thread(target=self._collect_logged, name="contextfold-serve-collect",
                                                daemon=True)
            self._collecting.start()
        return pruned

    def collect_blobs(self, now: float | None = None) -> int:
        """Delete what sessions unused for the sessions' age left in the blob store; how many tool outputs went.

        The age is the longest of the instances sharing the store (``serve.collection``: this instance's
        ``session_max_age_s`` is noted there first; one keeping sessions for good stops collection).
        """
        from .collection import collect, collection_instance

        at = time.time() if now is None else now
        with self._collect_lock:  # (one collection at a time: the periodic one and a caller's)
            return collect(self.blobs, collection_instance(self.config.session_max_age_s),
                           self.config.session_max_age_s, at, leases=self.leases is self.blobs)

    def _collect_logged(self) -> None:
        try:
            self.collect_blobs()
        except Exception as exc:  # (a store failing now: the next prune interval tries again)
            log_event("blob store collection failed", level=logging.WARNING, error=type(exc).__name__)

    def _drop_leases(self, sessions: Sequence[str]) -> None:
        """Delete the leases the pruned ``sessions`` left (an instance died holding one): one query, few deletes."""
        keys = [lease_key(session) for session in sessions]
        if not keys:
            return
        try:
            for key in set(keys) - self.blobs.missing(keys):
                self.blobs.delete(key)
        except StoreError:  # (a store failing now leaves them: ~150 bytes each, none of them read again)
            return

    def window(self, model: str) -> int | None:
        """The window for ``model``: configured, else the registry's (None), else the default; BadRequest if none."""
        from ..tokens.models import lookup_model

        configured = self.config.window_for(model)
        if configured is not None:
            return configured
        if lookup_model(model, with_prices=False) is not None:
            return None
        if self.config.default_window is not None:
            return self.config.default_window
        raise BadRequest(f"the proxy does not know the context window of model {model!r}: configure it "
                         "(--window MODEL=TOKENS or --default-window TOKENS)", "model")

    def counter(self, model: str) -> MessageCounter:
        """One message counter per model for the instance (its cache survives between requests).

        Keyed by the registry's model (``gpt-4o-mini-<suffix>`` counts as ``gpt-4o-mini``), and only the
        :data:`MAX_COUNTERS` most recently used are kept: the name is the client's, and a counter's cache grows to
        megabytes, so one kept per name sent would grow the instance without bound.
        """
        from ..tokens.models import lookup_model

        info = lookup_model(model, with_prices=False)
        key = info.name if info is not None else model
        with self._counters_lock:
            counter = self._counters.get(key)
            if counter is not None:
                self._counters.move_to_end(key)
                return counter
        from ..tokens import counter_for_model

        made = counter_for_model(key)
        with self._counters_lock:
            counter = self._counters.setdefault(key, made)
            self._counters.move_to_end(key)
            while len(self._counters) > MAX_COUNTERS:
                self._counters.popitem(last=False)
        return counter

    def manager(self, session_id: str, model: str, *, id_prefix: str,
                tools: Sequence[Mapping[str, Any]] = ()) -> ContextManager:
        """A manager for one step of ``session_id`` over the shared stores (``tools``: counted against the window)."""
        from ..manager import ContextManager

        return ContextManager(
            model, max_context_tokens=self.window(model), policy=self.config.policy, store=self.blobs,
            archive=self.archive, telemetry=self.telemetry, session_id=session_id, redact=self._redact(),
            counter=self.counter(model), archive_events=False, message_id_prefix=id_prefix, agent="contextfold-serve",
            tools=tools,
        )

    def _redact(self) -> Any:
        """What a manager is told to redact with: the built-in patterns (True), with the operator's beside them."""
        config = self.config
        return config.redactor() if config.redact and config.redact_patterns else config.redact

    def close(self) -> None:
        """Release the stores' connections and files (once a collection under way has ended)."""
        if self._collecting is not None:
            self._collecting.join()
        for resource in (self.sessions, self.blobs, *([self.leases] if self.leases is not self.blobs else [])):
            close = getattr(resource, "close", None)
            if callable(close):
                close()


def open_session_store(spec: str, state_dir: Path, max_age_s: float | None = None) -> MarkedSessionStore:
    """The session store ``spec`` names: ``local`` (SQLite under ``state_dir``), ``memory`` or ``redis://…``.

    ``max_age_s``: a Redis session expires that long after its last save.
    """
    if spec == "memory":
        from ..stores.session import MemorySessionStore

        return MemorySessionStore()
    if spec == "local":
        from ..stores.session_local import LocalSessionStore

        return LocalSessionStore(state_dir)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from ..stores.redis_session import RedisSessionStore

        return RedisSessionStore(spec, ttl_seconds=None if max_age_s is None else max(1, int(max_age_s)))
    from ..errors import ConfigError

    raise ConfigError(f"unknown session store {spec!r}: use local, memory or redis://host:port/db", field="sessions")


def _digest(parts: Sequence[str]) -> str:
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=_ID_DIGEST_HEX // 2).hexdigest()


@dataclass
class Turn:
    """One request's step of a session: the manager holding the view, and the version it was saved at."""

    exchange: Exchange
    session_id: str
    cm: ContextManager
    version: int
    marks: dict[str, str]
    fresh: int = 0
    rebuilt: bool = False
    attempts: int = 1
    conflicts: int = 0
    client_tokens: int = 0
    compactions_before: int = 0
    maskings_before: int = 0
    sent: Any = None
    id_prefix: str = ""
    converted: int = 0  # messages made of the client's items so far (their ordinals: serve.provenance)
    traced: list[list[int]] = field(default_factory=list)  # per item fed: the ordinals of its messages

    def view(self) -> Any:
        """The view to send, in the API's shape (the Responses instructions left out: they have their own field)."""
        cm = self.cm
        if self.exchange.api == "responses" and self.exchange.instructions:
            from ..formats import openai_responses
            from ..manager.reconcile import unpinned

            return openai_responses.encode(unpinned(cm, cm.prepare_messages()))
        # The client's own marks are not kept in the session (see _converter): contextfold's breakpoints stand in.
        return cm.prepare(self.exchange.format, cache_breakpoints=self.exchange.caches)


def follow_forks(backend: Backend, opening: str, exchange: Exchange, fork_id: Callable[[str], str],
                 tail_id: Callable[[str], str] | None = None) -> tuple[str, SessionState]:
    """The session a request named by its opening belongs to, with its state as loaded here.

    ``opening``: the session of the opening; ``fork_id``: the session id of a fork's name. The request belongs to a
    session whose fed items it extends, or that it slid (:func:`~contextfold.serve.provenance.slide_of`: the client
    dropped the oldest items after the ones it keeps, kept the newest, added new ones; only a session that maps its
    fed items to its messages, so that it can drop theirs). When it parts from them otherwise (item ``i``
    differs, or the request is shorter), it belongs to the fork named by its items up to ``i`` (all of them, when
    shorter): another conversation that opened alike. Forks of forks are followed the same way, ``MAX_FORK_HOPS``
    at most. ``tail_id``: the pointer entry named by a session's newest fed item (:func:`open_turn` writes it);
    with it, a request whose opening was never served (a client that dropped its first user message) is looked up
    as a slid window of the session whose newest fed item is among its ``MAX_SLIDE_PROBES`` newest items.
    """
    keys = [item_key(item) for item in exchange.items]
    session = opening
    for _ in range(MAX_FORK_HOPS):
        state = backend.sessions.load_state(session)
        known = _stored_keys(state.marks, session)
        if known is None and tail_id is not None:
            slid = _slid_session(backend, keys, tail_id)
            if slid is not None:
                return slid
        if known is None or keys[:len(known)] == known or _slides(state, session, known, keys):
            return session, state
        parted = next((i for i, (a, b) in enumerate(zip(known, keys, strict=False)) if a != b), len(keys))
        session = fork_id(_digest(keys[:parted + 1]))
    return session, backend.sessions.load_state(session)


def _slides(state: SessionState, session: str, known: list[str], keys: Sequence[str]) -> bool:
    """Whether ``keys`` is a slid window of the session's fed items that it can follow (it maps them to messages)."""
    return slide_of(known, keys) is not None and \
        Sources.read(state.marks, _mark_place(session, SOURCES_MARK), len(known)) is not None


def _slid_session(backend: Backend, keys: Sequence[str],
                  tail_id: Callable[[str], str]) -> tuple[str, SessionState] | None:
    """The session ``keys`` is a slid window of, found by the pointer of its newest fed item; None if none.

    That item is among the ones the client kept, at least ``MIN_SLIDE_OVERLAP`` of them: the request's first
    ``MIN_SLIDE_OVERLAP - 1`` items cannot be it and are not looked up (a new conversation's first request of a system
    prompt and a question looks up one pointer, not two).
    """
    for key in list(dict.fromkeys(reversed(keys[MIN_SLIDE_OVERLAP - 1:])))[:MAX_SLIDE_PROBES]:
        named = backend.sessions.load_state(tail_id(key)).marks.get("session")
        if named is None:
            continue
        state = backend.sessions.load_state(named)
        known = _stored_keys(state.marks, named)
        if known and known[-1] == key and _slides(state, named, known, keys):
            return named, state
    return None


def open_turn(backend: Backend, exchange: Exchange, session_id: str, *, continues: str | None = None,
              loaded: SessionState | None = None, tail_id: Callable[[str], str] | None = None,
              retag: Callable[[str], None] | None = None) -> Turn:
    """Load the session, feed it the request, prepare the view and save; redone from a fresh load on a conflict.

    ``continues``: the response id a Responses request continues (``previous_response_id``), whose session this
    is. ``loaded``: the session's state as a caller loaded it (:func:`follow_forks`), used for the first attempt (a
    save refused as stale redoes it from a fresh load). ``tail_id``: for a session named by its opening, the
    pointer entry named by its newest fed item is set to it (:func:`follow_forks` finds a slid window by it; the
    previous one is deleted, so a session keeps one). ``retag``: a conversation's lease, told the request's ``fed``
    mark before the save that writes it (:meth:`~contextfold.serve.leases.Lease.retag`: the head it is fed on may
    have moved since the lease was tagged). Raises BadRequest for a history the formats reject,
    Conflict for a continuation the session cannot take, StoreError when the stores stay unreachable.
    """
    backend.prune_sessions()  # (at most once per PRUNE_INTERVAL_S)
    conflicts = errors = 0
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            state = loaded if loaded is not None and attempt == 1 else backend.sessions.load_state(session_id)
            turn = _feed(backend, exchange, session_id, state.messages, state.version, dict(state.marks), continues)
            turn.sent = turn.view()  # compacts when due, before the state is saved
            if retag is not None and "fed" in turn.marks:
                retag(turn.marks["fed"])
            turn.version = backend.sessions.save(session_id, turn.cm.stored_messages(), state.version,
                                                 marks=turn.marks)
            turn.attempts, turn.conflicts = attempt, conflicts
            if tail_id is not None:
                _point_tail(backend, session_id, _stored_keys(state.marks, session_id), turn.marks, tail_id)
            return turn
        except SessionConflict:
            conflicts += 1
        except CorruptRecord:
            raise  # (it stays as it is: trying again reads the same record)
        except StoreError:
            errors += 1
            if attempt == MAX_ATTEMPTS:
                raise
    raise StoreError(f"session {session_id!r} kept conflicting after {MAX_ATTEMPTS} attempts")


def _point_tail(backend: Backend, session_id: str, before: list[str] | None, marks: Mapping[str, str],
                tail_id: Callable[[str], str]) -> None:
    """Point the entry named by the session's newest fed item at it; delete the one of the previous newest."""
    known = _stored_keys(marks, session_id)
    if not known or (before and before[-1] == known[-1]):
        return
    pointer = tail_id(known[-1])
    try:  # (an entry named by a new item most often: saved as new, without a load to learn its version)
        backend.sessions.save(pointer, [], 0, marks={"session": session_id})
    except SessionConflict:
        backend.sessions.save(pointer, [], backend.sessions.load_state(pointer).version,
                              marks={"session": session_id})
    delete = getattr(backend.sessions, "delete", None)
    if before and callable(delete):
        old = tail_id(before[-1])
        if backend.sessions.load_state(old).marks.get("session") == session_id:
            delete(old)


def _feed(backend: Backend, exchange: Exchange, session_id: str, stored: list[Any], version: int,
          marks: dict[str, str], continues: str | None) -> Turn:
    from ..formats import get_format
    from ..manager.reconcile import pin_head, reconcile
    from .retrieval import TOOL_NAMES, added_schemas, added_tool_names

    wire = get_format(exchange.format)
    keys = [item_key(item) for item in exchange.items]
    known = _stored_keys(marks, session_id)
    sources = slide = None
    if exchange.handle is None and known is not None:
        sources = Sources.read(marks, _mark_place(session_id, SOURCES_MARK), len(known))
        slide = None if sources is None else slide_of(known, keys)
    dropped: set[str] = set()
    retried = _failed_try(exchange, marks, keys, continues, session_id)
    if retried is not None:
        # An edited retry of a continuation whose call failed: the failed try's input leaves the view (archived).
        dropped, count = retried
        known = (known or [])[:max(0, len(known or []) - count)]
    if slide is not None and sources is not None and known is not None:
        # The client dropped items the session was fed: the session goes on, and their messages leave its view.
        dropped = sources.dropped(*slide)
        sources.without(*slide)
        known = [*known[:slide[0]], *known[slide[1]:]]
    if exchange.handle is None:
        fresh_keys = keys[len(known):] if known is not None and keys[:len(known)] == known else keys
    else:
        fresh_keys = keys
    tools = exchange.body.get("tools")
    id_prefix = f"{session_id}:{version}.{_digest(fresh_keys)}"
    cm = backend.manager(session_id, exchange.model, id_prefix=id_prefix,
                         tools=[t for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) else ())
    schema = _response_format(exchange.body)
    # The retrieval tools' schemas the proxy adds travel with every request too: counted with the view.
    retrieval = added_schemas(exchange.format, exchange.body, cm) if backend.config.retrieval_tools else []
    if schema is not None or retrieval:  # a structured-output schema travels with every request: counted too
        cm.set_request_extras(tools=[*cm.tools, *retrieval], response_format=schema)
    # The notes (receipt, budget line) name only the retrieval tools the proxy answers: a client's own tool of such a
    # name is the client's (proxy_tool_names), so sending the model to it for the archive would be wrong.
    added = added_tool_names(exchange.body, cm) if backend.config.retrieval_tools else frozenset()
    cm.steering.declared_tools -= TOOL_NAMES
    cm.steering.offer(added)
    if cm.cache is not None:  # (and a note on a cut output, likewise)
        cm.cache.names_retrieval_tools = {"tool_output_cache", "tool_output_cache_grep"} <= added
    gone: list[Any] = []
    if dropped:  # (left out before adopting: the view the session goes on with is the client's less what it dropped)
        gone = [m for m in stored if m.meta.get("id") in dropped]
        stored = [m for m in stored if m.meta.get("id") not in dropped]
    if stored:
        _refresh_claims(backend, session_id, stored, marks)
        cm.adopt(stored)
        if not gone:  # (a usage report is of the view it was sent with: not of this one)
            _ground(cm, session_id, marks, version)
    turn = Turn(exchange, session_id, cm, version, marks, compactions_before=cm.compactions,
                maskings_before=cm.maskings, id_prefix=id_prefix)
    dropped_tokens = _archive_dropped(backend, cm, session_id, gone) if gone else 0
    if exchange.instructions:
        pin_head(cm, INSTRUCTIONS_ID, exchange.instructions)
    try:
        if exchange.handle is None:
            if known is not None:
                cm.framework_history.remember(SOURCE, known)
            outcome = reconcile(cm, SOURCE, exchange.items, key=item_key, convert=_converter(turn, wire))
            turn.fresh, turn.rebuilt = outcome.fresh, outcome.rebuilt
            marks["keys"] = json.dumps(keys)
            if known is None or turn.rebuilt:
                sources = Sources()
            if sources is not None:
                sources.extend(id_prefix, turn.traced)
            # (A session saved before the map existed, or an item count it does not match: no map, no slide.)
            marks[SOURCES_MARK] = sources.dumps() if sources is not None and len(sources.items) == len(keys) else ""
        else:
            items = _continuation(exchange, session_id, marks, keys, continues)
            if items:
                cm.add(_converter(turn, wire)(items))
                marks["keys"] = json.dumps([*(known or []), *(item_key(i) for i in items)])
                # The messages of the request's own input (not the previous reply fed before it): what an edited
                # retry after this call failed takes out again (_failed_try).
                own = turn.traced[len(items) - len(exchange.items):]
                marks[FED_INPUT_MARK] = json.dumps({"ids": [message_id(id_prefix, n) for ordinals in own
                                                            for n in ordinals], "items": len(exchange.items)})
            turn.fresh = len(items)
    except BadRequest:
        raise
    except (ValueError, TypeError, KeyError) as exc:  # InvalidHistory is a ValueError: a history no API takes
        raise BadRequest(str(exc), "input" if exchange.api == "responses" else "messages") from exc
    # What the client's history holds, by our count before any cut: tokens saved = this - what is sent.
    stored_tokens = marks.get("client_tokens", 0)
    before = 0 if turn.rebuilt else stored_count(stored_tokens, _mark_place(session_id, "client_tokens"), "token count")
    marks["client_tokens"] = str(max(0, before - dropped_tokens) + turn.client_tokens)
    return turn


def _refresh_claims(backend: Backend, session_id: str, stored: Sequence[Any], marks: dict[str, str]) -> None:
    """Claim again the outputs the session's saved view cites, at most every ``CLAIM_REFRESH_S`` (its mark).

    Collection (serve.collection) ages an output by its claims, which a cache writes when it stores or reads it: a
    session still continued whose cut output it does not read again had that output (and its secret memory, aged by
    the same claims) deleted while its view still cited the ref. A claim refreshed as the session is used keeps them
    as long as the session is. Refreshed before the save that writes the mark; at the backend's clock.

    The session's use is noted beside them (``owners.write_use``): a session whose view cites no output claims
    none, and its secret memory, saved only when it learns a secret, was deleted an age after its last save while
    the session still lived (its later archives and log lines then quoted what it had learned in clear).
    """
    from ..cache import referenced_refs
    from ..cache._cache import CLAIM_REFRESH_S
    from ..cache.owners import owner_tag, write_claim, write_use

    now = backend.clock()
    try:
        last = float(marks.get(CLAIMS_MARK, "-inf"))
    except ValueError:
        last = -math.inf  # (not the proxy's: refreshed, and rewritten)
    if now - last < CLAIM_REFRESH_S and last <= now:
        return
    tag = owner_tag(session_id)
    write_use(backend.blobs, tag, now)
    for ref in sorted(referenced_refs(stored)):
        write_claim(backend.blobs, ref, tag, now)
    marks[CLAIMS_MARK] = repr(now)


def add_round(turn: Turn, messages: list[Any]) -> None:
    """Add a retrieval round's ``messages`` to the view (:func:`own_round`); a continuation's input mark names them.

    The round belongs to the request's own input: an edited retry after this request's call failed takes it out
    with that input (_failed_try), or the model's call and its result, answering a question the client took back,
    stayed in front of the retry's input.
    """
    before = {m.meta.get("id") for m in turn.cm.stored_messages()}
    turn.cm.add(own_round(turn, messages))
    if turn.exchange.handle is None or FED_INPUT_MARK not in turn.marks:
        return
    noted = _mark_json(turn.marks, FED_INPUT_MARK, turn.session_id)
    if not (isinstance(noted, dict) and isinstance(noted.get("ids"), list)):
        return  # (not the proxy's: _failed_try says so if it is ever read)
    added = [ident for m in turn.cm.stored_messages()
             if isinstance(ident := m.meta.get("id"), str) and ident not in before]
    turn.marks[FED_INPUT_MARK] = json.dumps({**noted, "ids": [*noted["ids"], *added]})


def own_round(turn: Turn, messages: list[Any]) -> list[Any]:
    """``messages`` of a retrieval round, named as the request's newest item's (they leave the view with it)."""
    keys = _stored_keys(turn.marks, turn.session_id)
    sources = Sources.read(turn.marks, _mark_place(turn.session_id, SOURCES_MARK), len(keys)) if keys else None
    if sources is None or not sources.items:
        return messages
    ids = sources.claim_for_newest(len(messages))
    turn.marks[SOURCES_MARK] = sources.dumps()
    return [m.with_id(i) for m, i in zip(messages, ids, strict=True)]


def _archive_dropped(backend: Backend, cm: ContextManager, session_id: str, gone: list[Any]) -> int:
    """Archive the messages a client dropped (redacted as the session redacts); their tokens as counted.

    Only them, not the whole view (a rewrite of the view archives all of it: a client with a large window that
    slides each turn would archive its whole window every turn). What compaction or masking made of them goes with
    them; a summary stays (contextfold's note, bounded).
    """
    tokens = sum(cm.counter.count_message(m) for m in gone)
    redactor = cm.redactor
    redacted = redactor.redact_messages(gone) if redactor is not None and hasattr(redactor, "redact_messages") \
        else gone
    backend.archive.archive_transcript(session_id, redacted)
    return tokens


def _mark_place(session_id: str, name: str) -> str:
    return f"session {session_id!r}, stored mark {name!r}"


def _mark_json(marks: Mapping[str, str], name: str, session_id: str) -> Any:
    """The JSON value of mark ``name`` (None when absent); StoreError when it is no JSON the reader can take.

    The session store is shared: a mark another writer left (nested past the reader's depth, not JSON) must be an
    error naming it, not an internal error of every request of the session.
    """
    raw = marks.get(name)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise CorruptRecord(f"{_mark_place(session_id, name)}: {json_problem(exc)} (not saved by the proxy)") from None


def _stored_keys(marks: Mapping[str, str], session_id: str) -> list[str] | None:
    """The item keys the session was fed (the ``keys`` mark), None when never saved."""
    known = _mark_json(marks, "keys", session_id)
    if known is not None and not (isinstance(known, list) and all(isinstance(k, str) for k in known)):
        raise CorruptRecord(f"{_mark_place(session_id, 'keys')}: no list of item keys (not saved by the proxy)")
    return known


def _response_format(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The structured-output schema of a request (Chat ``response_format``, Responses ``text.format``), if any."""
    value = body.get("response_format")
    text = body.get("text")
    if value is None and isinstance(text, Mapping):
        value = text.get("format")
    return value if isinstance(value, Mapping) and value.get("type") == "json_schema" else None


def _ground(cm: ContextManager, session_id: str, marks: Mapping[str, str], version: int) -> None:
    """Ground the counts in the usage the provider reported for the stored view (saved by :func:`save_reply`).

    Only when that view is the one loaded (the usage was saved right after it, nothing else since): the estimate
    of a model without an exact tokenizer is then corrected by the provider's own count, request after request.
    """
    usage = _mark_json(marks, "usage", session_id)
    if isinstance(usage, dict) and usage.get("version") == version - 1 and isinstance(usage.get("prompt"), int):
        cm.record_usage({"prompt_tokens": usage["prompt"], "completion_tokens": 0, "total_tokens": usage["prompt"]},
                        of_current_view=True)


def _converter(turn: Turn, wire: Any) -> Any:
    from ..billing.breakpoints import without_marks
    from ..formats.intake import repair_reply_arguments

    def convert(items: Sequence[Mapping[str, Any]]) -> list[Any]:
        # The model's replies come back in the client's history: a call cut at max_tokens must not make the
        # conversation unservable. A client's cache marks move every turn: kept, they would pile up past 4.
        # Each message is named by the turn and its ordinal, and each item's messages noted (serve.provenance).
        decoded, owners = decode_traced(wire.decode, repair_reply_arguments(turn.exchange.format, items))
        base = turn.converted
        messages = [without_marks(m).with_id(message_id(turn.id_prefix, base + k)) for k, m in enumerate(decoded)]
        turn.converted += len(messages)
        turn.traced.extend([base + k for k in own] for own in owners)
        counter = turn.cm.counter
        turn.client_tokens += sum(counter.count_message(m) for m in messages)
        return list(messages)

    return convert


def _failed_try(exchange: Exchange, marks: Mapping[str, str], keys: Sequence[str], continues: str | None,
                session_id: str) -> tuple[set[str], int] | None:
    """The message ids and item count of a failed try's input that an edited retry of it replaces; None if none.

    A continuation of the session's head (``previous_response_id``) is fed and saved before its call; when the call
    fails, no reply moves the head, and the client continues the same response again, often with its input edited.
    A response continued is its history and the new input (the Responses API's own semantics): the failed try's
    input goes. Told by the ``fed`` mark: a continuation of this same head whose input differs (the same input is
    the same request retried: fed once). Not for a ``conversation``, whose failed request may stand in it.
    """
    if exchange.handle is None or exchange.handle[0] != "response" or continues is None:
        return None
    fed, head = marks.get("fed"), marks.get("head")
    if head != continues or fed is None or fed == continuation_tag(continues, keys) or \
            fed.rpartition(":")[0] != str(continues):
        return None
    noted = _mark_json(marks, FED_INPUT_MARK, session_id)
    if not isinstance(noted, dict):
        return None  # (fed before the mark existed: it stays, as it did)
    ids, items = noted.get("ids"), noted.get("items")
    if not (isinstance(ids, list) and all(isinstance(i, str) for i in ids) and isinstance(items, int)
            and not isinstance(items, bool) and items >= 0):
        raise CorruptRecord(f"{_mark_place(session_id, FED_INPUT_MARK)}: no ids and item count (not saved by the "
                            "proxy)")
    return set(ids), items


def continuation_tag(response_id: str | None, keys: Sequence[str]) -> str:
    """Which continuation a Responses request is: the response it continues, and its input's item keys."""
    return f"{response_id}:{_digest(keys)}"


def _continuation(exchange: Exchange, session_id: str, marks: dict[str, str], keys: list[str],
                  continues: str | None) -> list[dict[str, Any]]:
    """Items a continued Responses request feeds: the previous reply (held by the proxy), then its input.

    A request retried after it was fed (its instance died before answering) feeds nothing again.
    """
    head = marks.get("head")
    previous = continues if exchange.handle is not None and exchange.handle[0] == "response" else head
    tag = continuation_tag(previous, keys)
    if marks.get("fed") == tag:
        return []
    if exchange.handle is not None and exchange.handle[0] == "response" and previous != head:
        raise Conflict(f"response {previous!r} is not the latest of its conversation ({head!r} is): the proxy "
                       "continues only the latest response; send the whole history instead", "previous_response_id")
    pending = _mark_json(marks, "pending", session_id)
    # Emptied, not dropped: a save sets the marks it is given and keeps the others, so a dropped mark stayed, and an
    # edited retry after this request's failed call fed the previous reply a second time.
    marks["pending"] = "[]"
    if pending is None:
        pending = []
    if not (isinstance(pending, list) and all(isinstance(item, dict) for item in pending)):
        raise CorruptRecord(f"{_mark_place(session_id, 'pending')}: no list of items (not saved by the proxy)")
    marks["fed"] = tag
    return [*pending, *exchange.items]


def save_reply(backend: Backend, turn: Turn, *, prompt_tokens: int | None, response_id: str | None = None,
               items: Sequence[Mapping[str, Any]] = (), pointer: str | None = None) -> None:
    """After a reply: keep its usage for the next request, and a Responses reply as the session's head.

    Saved as marks only (the view stays as it was). The usage (``usage``: the provider's prompt tokens and the
    version of the view they counted) grounds the next request's counts when the session is still at that view.
    A Responses reply is fed before the next continuation's input, and a pointer entry (``pointer``, named by
    the caller and the response id) maps the response to its session, so that any instance can continue it.
    A conflict reloads and sets the marks again (the usage only if the view did not change). ``pointer`` without
    ``response_id``: a reply that does not become the head (its request lost its lease) is still mapped to its
    session, so that a continuation of it is refused as not the latest rather than as unknown.
    """
    # First try against the version this request saved, with the view it saved: no load, and the store writes
    # only the marks (it still holds those messages). Only after a conflict is the session loaded again.
    # A continuation's reply becomes the head only while the session's fed mark is still its own (compare-and-set by
    # the version): another request fed meanwhile (it took the lease over) moved the session on.
    fed = turn.marks.get("fed") if turn.exchange.handle is not None else None
    messages, version = turn.cm.stored_messages(), turn.version
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            marks: dict[str, str] = {}
            if prompt_tokens and version == turn.version:
                marks["usage"] = json.dumps({"prompt": prompt_tokens, "version": turn.version})
            if response_id is not None:
                marks.update(head=response_id, pending=json.dumps(list(items)))
            if not marks:
                break
            backend.sessions.save(turn.session_id, messages, version, marks=marks)
            break
        except SessionConflict:
            if attempt == MAX_ATTEMPTS or response_id is None:
                break  # the usage of a view that moved on grounds nothing
            state = backend.sessions.load_state(turn.session_id)
            if fed is not None and state.marks.get("fed") != fed:
                log_event("reply not the head", level=logging.WARNING, session=turn.session_id,
                          problem="another request continued the session while this one was answered")
                break
            messages, version = state.messages, state.version
    if pointer is not None:
        backend.sessions.save(pointer, [], backend.sessions.load_state(pointer).version,
                              marks={"session": turn.session_id})


def session_marks(backend: Backend, session_id: str) -> Mapping[str, str]:
    """The session's marks as stored (``head``: the response it was last answered with; ``fed``: see _continuation)."""
    return backend.sessions.load_state(session_id).marks


def resolve_pointer(backend: Backend, pointer: str) -> str | None:
    """The session a response belongs to, from its pointer entry; None when the proxy never gave that response."""
    return backend.sessions.load_state(pointer).marks.get("session")


def restore(backend: Backend, session_id: str) -> list[Any]:
    """The session's whole history as the clients sent it: the archive merged with the stored view, outputs whole.

    Nothing the clients sent is lost: what left the view was archived first, and what is still in it is stored.
    """
    from ..cache import ToolOutputCache

    state = backend.sessions.load_state(session_id)
    cache = ToolOutputCache(backend.blobs)
    return backend.archive.restore_history(session_id, state.messages, resolve_ref=cache.get)
