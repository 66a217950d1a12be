"""The ContextManager: one per agent session, the one stateful object.

It owns the view (what the model sees), the tool output cache, the archive and the telemetry, and runs the flow of
a turn (DESIGN.md): ``add`` truncates big tool outputs at write time and counts only the new messages; ``prepare``
normalizes, decides, masks / summarizes / compacts when the policy says so, archives what leaves the view, and
returns the view in the caller's wire format; ``record_usage`` grounds the next decision in the provider's counts.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ..telemetry._pace import foreground
from ._archiver import Archiver
from ._cache_economics import CacheEconomics
from ._compactor import Compactor, protected_names, with_tail
from ._idle import IdleCompactions
from ._lost_refs import mark_lost_refs
from ._masking import Masking, keep_layout
from ._read_ahead import HeldOutputs
from ._request_extras import RequestExtras
from ._secrets import SessionSecrets
from ._spans import CALL_KIND, CALL_SPAN, COMPACT_KIND, session_metadata

# Everything else is imported where it is used (issue 15): ``from contextfold import ContextManager`` loads this
# module, its two mixins and the span names; building a manager loads what a turn needs; compaction, summarizing,
# redaction patterns and the other wire formats load when first used.
if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..compaction import Budgets, CompactionResult, Plan, Policy
    from ..media import MediaLimits, MediaTally
    from ..messages import Message
    from ..summarize import Summarizer
    from ..telemetry import CacheTruncated
    from ..tokens import MessageCounter, TokenUsage
    from ._build import CompactionReport, Components, Status

__all__ = ["ContextManager"]


_log = logging.getLogger(__name__)

# Compaction actions by strength: a compaction is stuck when the view still calls for one at least as strong.
# (Keyed by the actions' values: Action is a StrEnum, and the policy module is imported only when first needed.)
_COMPACTION_RANK = {"soft": 1, "hard": 2, "emergency": 3}
# Past half the soft threshold a compaction is a few turns away: read the new messages in the background while the
# agent waits for its model (entities extracted, secrets scanned), so that the compaction finds them read (issue 15).
_WARM_AT_SHARE_OF_SOFT = 0.5
# A manager never holds more than this many messages waiting (a huge add() before the threshold is reached is
# warmed only in part; the compaction reads the rest itself).
_MAX_UNWARMED = 20_000
# 48 random bits per manager: collisions between the managers of one session are out of reach.
_ID_NONCE_HEX = 12
# A reported prompt above this many times the configured window is no count of a request the provider accepted (a
# proxy summing a session's usage, a misreporting server): grounding the view in it compacted on every turn. A
# model's real window may be above the configured one (a 1M-token beta of a 200K model), hence a wide factor.
_IMPLAUSIBLE_PROMPT_FACTOR = 8


class ContextManager:
    """Keeps one agent session inside its model's context window.

    >>> cm = ContextManager(model="gpt-4o", store="memory", archive="memory")
    >>> cm.add([{"role": "user", "content": "hello"}])
    >>> cm.prepare(format="openai_chat")
    [{'role': 'user', 'content': 'hello'}]

    Args:
        model: The model the agent calls; its window and tokenizer come from the registry.
        max_context_tokens: The window to work within (required for models the registry does not know).
        policy: A :class:`~contextfold.compaction.Policy` or a mapping of its fields.
        summarizer: A :class:`~contextfold.summarize.Summarizer`, or a name: ``"extractive"`` (the default, no
            LLM), ``"openai:gpt-4o-mini"``, ``"anthropic:claude-haiku-4-5"``, ``"litellm:..."``.
        store: Where full tool outputs go: ``"local"`` (SQLite under ``.contextfold/``, the default), ``"memory"``,
            ``"redis://…"``, or a BlobStore.
        archive: Where pre-compaction transcripts go: a directory path, ``"memory"``, ``"s3://bucket/prefix"``,
            an ArchiveStore, or None for ``.contextfold/archive``.
        telemetry: A Telemetry sink (``emit(event)``) for the events; None records nothing.
        session_id: Names the session in the archive, the events and the stores.
        tools: Tool schemas sent with every request (counted against the window).
        redact: Redact secrets from archived transcripts and events: True (the default), False, or a
            configured :class:`~contextfold.redact.Redactor`.
        background: Run soft compaction on a worker thread when a check (after a model call, after tool
            results arrive, before the agent finishes) finds the view over the soft threshold, so the model-call
            path rarely waits for a summary.
        message_id_prefix: Prefix of the ids given to added messages (``meta["id"]``); a random per-manager
            nonce by default, so that two managers of one session never reuse an id in the archive.
        agent: The agent's name in the session trace (trace viewers group sessions by it).
        before_compaction: Called as ``hook(leaving, summary)`` right before a compaction replaces messages
            (``leaving``: the messages leaving the view; ``summary``: the SummaryResult or None), e.g. to save facts
            to a memory store first. Its errors become ``compact.warning`` events.
        tool_output: Write-time truncation: a :class:`~contextfold.cache.CacheConfig` or a mapping of its fields
            (``max_message_tokens``, ``unit``, ``serialization_buffer``, ``max_message_lines``, ``header``, …).
        counter: A MessageCounter to share (its per-message cache) with other managers of the process; by default
            one for ``model``.
        archive_events: Append the session's events to the archive's ``events.jsonl`` (on a telemetry thread of
            this manager). A fleet worker turns it off and exports every session's events on one thread.
        defer_soft: Leave soft compaction to someone else (a fleet's background compactor, see
            :mod:`contextfold.fleet`): ``prepare()`` still masks and compacts at the hard threshold and the
            emergency cap, and ``last_plan`` says when soft compaction is due.
    """

    def __init__(
        self,
        model: str = "gpt-4o",
        *,
        max_context_tokens: int | None = None,
        policy: Policy | Mapping[str, Any] | None = None,
        summarizer: Any = "extractive",
        store: Any = "local",
        archive: Any = None,
        telemetry: Any = None,
        session_id: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        redact: Any = True,
        clock: Any = None,
        background: bool = False,
        message_id_prefix: str | None = None,
        agent: str | None = None,
        tool_output: Any = None,
        before_compaction: Callable[[list[Message], Any], None] | None = None,
        counter: MessageCounter | None = None,
        archive_events: bool = True,
        defer_soft: bool = False,
    ) -> None:
        from ..steering import Steering, schema_tool_names
        from ..telemetry import CompactWarning
        from ..tokens import TokenUsage
        from ._answered_view import AnsweredWidening
        from ._build import build_components
        from ._limits import ProviderLimit
        from ._view import View
        from .reconcile import FrameworkHistory

        parts: Components = build_components(
            model=model, max_context_tokens=max_context_tokens, policy=policy, summarizer=summarizer, store=store,
            archive=archive, telemetry=telemetry, session_id=session_id, redact=redact, clock=clock,
            tool_output=tool_output,
            counter=counter, archive_events=archive_events,
        )
        self.model = parts.model
        self.policy = parts.policy
        self.budgets = parts.budgets
        self._window_budgets = parts.budgets  # the thresholds of the configured window (a learned limit lowers them)
        self._cache_budget: int | None = None  # the write-time budget a learned limit set, when it set one
        self.counter = parts.counter
        self.cache = parts.cache
        self._summarizer = parts.summarizer
        self.archive = parts.archive
        self.tracer = parts.tracer
        self.session_id = parts.session_id
        self.redactor = parts.redactor
        self._clock = parts.clock
        self.background = background
        self.defer_soft = defer_soft
        # What every request carries beside the messages, counted against the window with the view.
        self._extras = RequestExtras(self.counter, tools)
        # What the agent sees of its own context (issue 24): per-tool rules, masking order, budget line, receipts.
        self.steering = Steering(self.policy, self.counter, schema_tool_names(self._extras.tools))
        self._view = View(self.counter)
        self._lock = threading.RLock()
        self._seq = 0
        self._archived_seq = 0  # messages added before the last archived transcript
        # The parts: each a concept of its own with its own state; the manager holds the lock and the view.
        # The session's secrets: learned before anything of contextfold's own is written, saved to its store.
        self._secrets = SessionSecrets(self.redactor, self.cache)
        self._archiver = Archiver(self.archive, self.redactor, self.session_id, self.tracer, self._secrets)
        self._compactor = Compactor(policy=self.policy, budgets=self.budgets, counter=self.counter, cache=self.cache,
                                    tracer=self.tracer, session_id=self.session_id, clock=self._clock)
        self._idle = IdleCompactions()
        # Whether a masking batch, a soft compaction or a wider answered output pays for the prompt cache it costs.
        self._economics = CacheEconomics(policy=self.policy, model=self.model, counter=self.counter,
                                         tracer=self.tracer, session_id=self.session_id, clock=self._clock)
        self._masking = Masking(cache=self.cache, view=self._view, counter=self.counter, policy=self.policy,
                                steering=self.steering, economics=self._economics, secrets=self._secrets,
                                tracer=self.tracer, session_id=self.session_id)
        self._status_uncounted = 0  # tokens of the last budget line sent that decisions did not count
        # Ids must not repeat across managers of one session (a restarted process, another worker): the archive
        # merges transcripts by id, so a second "s1:1" would hide the first. A per-manager nonce keeps them apart.
        # Pass message_id_prefix for reproducible ids (a replay), when one process owns the session for good.
        self._id_prefix = message_id_prefix or f"{self.session_id}:{uuid.uuid4().hex[:_ID_NONCE_HEX]}"
        self._compactions = 0
        self.before_compaction = before_compaction
        self._unwarmed: list[Message] = []  # messages added that no background warming has read yet
        self._unredacted = 0  # of those, the first this many, added before add() redacted what it adds
        self._warm_after_policy = False  # the new messages are read ahead once the policy has acted
        self._held_outputs = HeldOutputs()  # outputs whose digest material is read once a masking can take them
        self._reading = False  # past half the soft threshold: add() reads what it adds (see _read_on_add)
        self._grounding: tuple[int, int, int] | None = None  # (view version, messages sent, reported - counted)
        # The version of the view this manager last prepared: a usage report grounds only that view (an older
        # reply's usage fed by an adapter to a new manager over a persisted history is of a view it never sent).
        self._prepared_version: int | None = None
        self.last_plan: Plan | None = None
        self._closed = False
        self.usage_total = TokenUsage()
        # What framework adapters have fed this manager (reconcile.py): adapters themselves keep no such state.
        self.framework_history = FrameworkHistory()
        # 004's trigger_decision policy block (trigger_pct, hard_cap_buffer, strategy) and the thresholds it gives.
        self._policy_summary = {"trigger_pct": self.policy.trigger_pct, "soft_pct": self.policy.soft_pct,
                                "hard_cap_buffer": self.policy.hard_cap_buffer, "strategy": str(self.policy.strategy),
                                "hard": self.budgets.hard, "soft": self.budgets.soft, "auto": self.policy.auto}
        # Answered outputs shown wider for the coming call (and the standard views they go back to).
        self._widening = AnsweredWidening(self.cache, self.counter) if self.cache is not None else None
        # The provider's real limit, learned from its overflow errors and kept in the store per model (issue 21).
        from ..cache.owners import owner_tag

        self._limit = ProviderLimit(self.model.name, self.cache.store if self.cache is not None else None,
                                    self._limit_store_failed, session_tag=owner_tag(self.session_id))
        self._calls = 0
        # The images and documents a request may carry (published limits, lowered by the provider's errors).
        from ._media import MediaGuard

        self._media = MediaGuard(self.model.provider, model=self.model.name,
                                 store=self.cache.store if self.cache is not None else None,
                                 warn=self._limit_store_failed)
        # The providers' own context management (issue 23): who compacts, what the provider reported, and which
        # providers' opaque state the view may hold (a prepare() in another format reports what it leaves out).
        from ..provider_context import ProviderContext
        from ._provider_items import ProviderItems

        self.provider_context = ProviderContext(self.policy, self.budgets, self.tracer, self.session_id)
        self._provider_items = ProviderItems(self.tracer, self.session_id)
        for warning in parts.warnings:
            self.tracer.emit(CompactWarning(session_id=self.session_id, message=warning, code="config"))
        self.tracer.start_session(self.session_id, session_metadata(
            agent=agent, model=self.model.name, window=self.budgets.window, policy=self._policy_summary))

    @classmethod
    def from_config(cls, path: str | None = None, *, env: Mapping[str, str] | None = None,
                    **kwargs: Any) -> ContextManager:
        """Build a manager from a YAML file, then environment overrides, then ``kwargs`` (which win).

        Settings keys (``model``, ``max_context_tokens``, ``policy``, ``telemetry``, ``storage``, ``redaction``)
        go through :func:`contextfold.config.load_settings`; other keywords (``summarizer``, ``session_id``,
        ``tools``, …) go to the constructor.
        """
        from pydantic import BaseModel

        from ..config import load_settings
        from ..telemetry import CompactWarning
        from ._build import settings_arguments

        # telemetry=a sink (not a settings mapping) goes to the constructor, like summarizer=an object.
        setting_keys = {"model", "max_context_tokens", "policy", "summarizer", "telemetry", "storage", "redaction",
                        "tool_output"}
        # tool_output as a settings mapping uses the YAML names (max_tokens, …); a CacheConfig goes to the constructor
        setting_keys = {k for k in setting_keys & set(kwargs)
                        if k in ("model", "max_context_tokens") or isinstance(kwargs[k], Mapping | BaseModel)
                        or (k == "summarizer" and isinstance(kwargs[k], str))}
        settings = load_settings(path, env=env, **{k: v for k, v in kwargs.items() if k in setting_keys})
        args = settings_arguments(settings)
        args.update({k: v for k, v in kwargs.items() if k not in setting_keys})
        manager = cls(**args)
        for warning in settings.warnings:
            manager.tracer.emit(CompactWarning(session_id=manager.session_id, message=warning, code="config"))
        return manager

    # -- adding ---------------------------------------------------------------------------------------------------
    def add(self, messages: Iterable[Message | Mapping[str, Any]] | Message | Mapping[str, Any], *,
            format: str | None = None) -> None:
        """Append messages (Message objects or provider dicts, format auto-detected unless given).

        Big tool outputs are stored whole in the cache and replaced by a view with their ref at once.
        """
        from ._build import coerce_messages
        from ._collector import collector_paused

        with foreground, self._lock:
            incoming = coerce_messages(messages, format=format, start=len(self._view),
                                       protected_flag=self.policy.protected_flag)
            # A bulk add (a resumed history) keeps everything it makes: collections during it free nothing.
            with collector_paused(len(incoming)):
                self._add(incoming)

    def _add(self, incoming: list[Message]) -> None:
        """Store ``incoming`` (coerced, under the lock): the write-time views, the secrets, the view, the read-ahead."""
        from ..provider_context import BOUNDARY_KIND
        from ..telemetry import CacheTruncated

        if self._widening is not None and self._widening.active and any(m.role != "tool" for m in incoming):
            # A new turn: the outputs it follows are no longer being answered (unless putting one back would cost
            # more prompt cache than it saves: then it stays, as part of the history).
            self._widening.narrow(self._view, keep=self._keeps_wide)
        stored: list[Message] = []
        cut: dict[str, str] = {}  # ref -> the whole output, for the outputs cut at write time
        # The sequence moves only once every message is in: a failed add leaves no gap and no half-added batch.
        seq = self._seq
        prefix, large = self._id_prefix, self.policy.large_input_bytes
        boundaries = results = False  # (whether the batch holds a provider's compaction item, a tool result)
        # What the steps below made of each message object given in this batch, and its cut's event: a repeated or
        # resumed history gives one object many times (the 100,000 recorded messages are ~30 copies of 3,388), and
        # each step is a function of the message, the batch and the view as they stand (issue 22).
        made: dict[int, _Made] = {}
        # Each new message is counted soon after its write-time step, whose exact count of an output is then still
        # among the remembered counts of long texts (a bounded memo: 100,000 distinct messages counted after the loop
        # found none of those counts, and every output between the token cap and the byte cap was counted twice).
        self.counter.ensure_capacity(len(self._view) + len(incoming))
        uncounted: list[Message] = []
        for given in incoming:
            seq += 1
            again = made.get(id(given))
            if again is None:
                given_id = given.meta.get("id")
                m, truncated = self._store_one(given.with_id(given_id or f"{prefix}:{seq}"), incoming, cut)
                if "ref" not in given.meta:  # (a foreign ref may become the session's own within the batch)
                    text = given.content
                    made[id(given)] = _Made(m, truncated, given_id, type(text) is not str or 4 * len(text) > large,
                                            m.role == "tool", m.meta.get("kind") == BOUNDARY_KIND)
                uncounted.append(m)
                if len(uncounted) >= _COUNT_AFTER_STORED:
                    self.counter.count_each(uncounted)  # (remembered by the counter: the count below looks them up)
                    uncounted = []
            else:
                # A copy of ``first`` (its origin): what depends on the message alone was found for the first.
                first, truncated, given_id, maybe_large, _, _ = again
                m = first.with_id(given_id or f"{prefix}:{seq}")
                if maybe_large:
                    self._warn_if_large(given.with_id(m.meta["id"]))
                if truncated is not None:  # (an event of its own: its ids and time)
                    self.tracer.emit(CacheTruncated(session_id=self.session_id, ref=truncated.ref,
                                                    bytes=truncated.bytes, kept_bytes=truncated.kept_bytes,
                                                    tool_name=truncated.tool_name))
                stored.append(m)
                continue
            if m.role == "tool":
                results = True
            if m.meta.get("kind") == BOUNDARY_KIND:
                boundaries = True
            stored.append(m)
        # (The copies' roles and kinds are their first copy's, looked at once.)
        for entry in made.values():
            results = results or entry.tool
            boundaries = boundaries or entry.boundary
        self._seq = seq
        self._secrets.added(stored)
        self._note_steering(stored)
        queued = len(self._unwarmed)
        if queued < _MAX_UNWARMED:
            self._unwarmed.extend(_worth_reading(stored)[:_MAX_UNWARMED - queued])
        stored, orphans = self._view.split_orphans(stored)
        if orphans:
            self._view.dropped.extend(orphans)
            self._archive_dropped()
        self._view.append(stored)
        self._provider_items.note(stored)
        if orphans:
            boundaries = any(m.kind == BOUNDARY_KIND for m in stored)
            results = any(m.role == "tool" for m in stored)
        if boundaries and self._provider_items.drop_before_boundary(
                self._view, self._archive_transcript):
            self._compactor.floor = self._compactor.stalled = None  # of a view that no longer exists
        self.counter.ensure_capacity(len(self._view))
        # Counted now, as DESIGN's flow of a turn has it, not by the next prepare(): the exact tokenizer releases
        # the GIL, and a background thread taking it then would hold the model call up (issue 15, p99).
        added = sum(self.counter.count_each(stored))
        self._economics.added_tokens += added
        if len(stored) > _READ_AHEAD_MAX and added >= self.budgets.hard:
            # A bulk add past the hard threshold on its own: the next prepare() compacts it, and the background
            # read-ahead of its ends would run beside that compaction, learning again the secrets its catch-up learns
            # of messages it summarizes (~0.5 s of CPU in the first prepare() of 100,000 recorded messages, issue 22).
            del self._unwarmed[queued:]
        self._read_on_add(stored, cut)
        if not self._reading:
            self._unredacted = len(self._unwarmed)  # (past half the soft threshold, add() redacts what it adds)
        if results:
            self.check("after tool execution")

    def _store_one(self, m: Message, incoming: Sequence[Message], cut: dict[str, str],
                   ) -> tuple[Message, CacheTruncated | None]:
        """``m`` (with its id) as the view keeps it, and the event of its cut at write time if it was cut.

        The steps are skipped where their first test would return at once: this runs for each message of a bulk
        add (a resumed history of 100,000, issue 22).
        """
        from ..provider_context import mark
        from ..telemetry import CacheTruncated

        if type(m.content) is not str:
            m = mark(m)
        if "ref" in m.meta:
            m = self._without_foreign_ref(m)
        if type(m.content) is not str or 4 * len(m.content) > self.policy.large_input_bytes:
            self._warn_if_large(m)
        truncated = None
        if self.cache is not None and not m.protected:  # protected: byte for byte
            processed = (self._write_time_view(m, incoming) if m.role == "tool"
                         else self._cut_if_never_sent(m) if m.role == "user" else m)
            if processed is not m and processed.meta.get("ref"):
                cut[str(processed.meta["ref"])] = m.text
                # surrogatepass: a lone surrogate is stored as it came; measuring it must not fail.
                truncated = CacheTruncated(session_id=self.session_id, ref=str(processed.meta["ref"]),
                                           bytes=len(m.text.encode("utf-8", "surrogatepass")),
                                           kept_bytes=len(processed.text.encode("utf-8", "surrogatepass")),
                                           tool_name=m.name)
                self.tracer.emit(truncated)
            if processed is not m:
                m = keep_layout(m, processed)
        return m, truncated

    def _read_on_add(self, stored: list[Message], cut: dict[str, str]) -> None:
        """Read what later compactions and maskings need of the new messages, once, as they arrive (issue 22).

        The extractive summary's reading of each message and the secrets the archive will redact: remembered by
        content, so that masking, compaction and the archive assemble them instead of scanning the texts again. From
        half the soft threshold on (a compaction is a few turns away); what was added before is read on the
        background thread then (a tool output's digest material too, once a masking can take it: ``_read_ahead``).
        Of a bulk add (a resumed or imported history) only the two ends are read (see ``_worth_reading``); the
        compaction's catch-up learns the secrets of the rest (learning them here instead was measured to cost more
        than it saved, issue 22).
        """
        if not self._reading:
            tokens, _, _ = self._view.totals()
            if tokens + self._tool_tokens < self.budgets.soft * _WARM_AT_SHARE_OF_SOFT:
                return
            self._reading = True
        summarizer = self._summarizer
        extractive = summarizer is None  # (the default, built by the first compaction: not imported for this)
        if not extractive:
            from ..summarize import ExtractiveSummarizer

            extractive = isinstance(summarizer, ExtractiveSummarizer)
        worth = _worth_reading(stored)
        if extractive:
            from ..summarize.digest import read_message
            from ._compactor import masked_before_summarized

            never_masked = self._never_masked()
            for m in worth:
                if never_masked is None or not masked_before_summarized(m, never_masked):
                    read_message(m)
        # (A tool output's digest material is read when it is first masked, or ahead of that by the background
        # thread when masking is automatic: most outputs of a session that compacts are never masked.)
        self._secrets.learn_outputs(cut)  # the whole outputs cut at write time: scanned now, not on a masking turn
        # Each message redacted once, the result kept, a bulk add's two ends too: left to the compaction's catch-up
        # they cost it about what they saved here (~0.5 of ~0.6 s at 100,000 recorded messages), and a cold
        # compact() after one bulk add read 402 ms per 1M tokens instead of 314 (bench_compaction, issue 22).
        if self.redactor is not None and hasattr(self.redactor, "redact_ahead"):
            self.redactor.redact_ahead(worth, paced=False)

    def _without_foreign_ref(self, m: Message) -> Message:
        """``m`` without its ``meta["ref"]`` when that names an output this session does not own.

        A ref in an added message is contextfold's own bookkeeping (a message coming back from a framework's
        history); one this session never stored (another session's output, a made-up id) must not let widening,
        masking or restoring read that output into this session (issue 21 §4: 1,206 lines of another session's
        output appeared in a view). Its text stays as it came.
        """
        ref = m.meta.get("ref")
        if ref is None or self.cache is None or (isinstance(ref, str) and self.cache.owns(ref)):
            return m
        return m.with_meta(ref=None)

    def _write_time_view(self, m: Message, batch: Sequence[Message]) -> Message:
        """The tool result as the view keeps it: cut at write time under its tool's rule (``policy.tools``)."""
        assert self.cache is not None
        keep_whole, max_tokens = self.steering.write_rule(m, batch, self._view.raw)
        processed: Message = m if keep_whole else self.cache.process(m, max_tokens=max_tokens)
        return processed

    def _note_steering(self, stored: Sequence[Message]) -> None:
        """Tell the steering part what arrived; a tool whose outputs must not be summarized gets protected."""
        protected = self.steering.note_added(stored, self.policy.protected_tools)
        if protected is not None:
            self._compactor.policy = self.policy.model_copy(update={"protected_tools": protected})

    def _cut_if_never_sent(self, m: Message) -> Message:
        """A user message over the large-input limit and the whole window, cut to head, tail and ref at once.

        It could never be sent whole, and kept whole every later step would read all of it: a 10 MB paste made the
        next ``prepare()`` take 6.5 s, 50 MB 25-32 s and 1.6 GB (issue 22). Cut as it arrives, like a tool output
        at the write-time cap, the view, the summary and the archive read a few thousand tokens; the whole text is
        readable by its ref. Anything smaller stays whole (a compaction may still cut the request it answers).
        """
        window, limit = self.budgets.window, self.policy.large_input_bytes
        text = m.text
        # (A character takes at most four bytes, a token at least one: most messages are ruled out by their length.)
        if (self.cache is None or m.role != "user" or m.kind is not None or 4 * len(text) <= max(window, limit)
                or m.meta.get("ref") is not None or len(text.encode("utf-8", "surrogatepass")) <= limit):
            return m
        # The tokenizer's count (sampled past a length), not a provisional count in bytes, which would overstate it.
        if int(self.counter.counter.count(text)) <= window:
            return m
        cut: Message = self.cache.shrink(m, self.cache.config.message_tokens(self.cache.context_window))
        return cut

    def _warn_if_large(self, m: Message) -> None:
        """An input over ``policy.large_input_bytes`` (256 KB) is logged and reported (004 §2): usually a mistake."""
        limit = self.policy.large_input_bytes
        text = m.text
        if len(text) * 4 <= limit:  # UTF-8 takes at most 4 bytes a character: skip the encode for most messages
            return
        from ..telemetry import CompactWarning

        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            message = (f"{m.role} message {m.meta.get('id')} is {size:,} bytes, over the {limit:,}-byte input limit; "
                       "it is kept (tool outputs are cut to a view) but consider trimming it at the source")
            _log.warning(message)
            self.tracer.emit(CompactWarning(session_id=self.session_id, message=message, code="large_input"))

    # -- preparing ------------------------------------------------------------------------------------------------
    def prepare(self, format: str = "openai_chat", *, cache_breakpoints: bool = False) -> Any:
        """The view to send, in ``format``.

        A list of messages/items for OpenAI Chat and Responses; the request fragment for Anthropic
        (``{"system", "messages"}``) and Gemini (``{"system_instruction", "contents"}``). Compacts first when
        the policy says so; raises InsufficientBudget when even full compaction cannot fit. With
        ``policy.context_status`` on, the budget line (:meth:`status_message`) comes last. ``cache_breakpoints``
        (Anthropic): ``cache_control`` on the pinned head, the latest summary and the last history message
        (:func:`contextfold.billing.breakpoints.mark_breakpoints`), unless a message already carries one.
        """
        from ..formats import get_format

        wire = get_format(format)
        with foreground, self._lock:
            self._prepare_view()
            self._provider_items.report_drops(self._view, format)
            if self._view.dropped:  # what normalization removed for good goes to the archive now, not "later"
                self._archive_dropped()
            status = self._status_after_view(sending=True)
            tail = [status] if status is not None else []
            if self._redacts_model_input():
                # Configured (Redactor(apply_to_model=True)): the model sees the redacted view, encoded afresh.
                view = [*self.redactor.redact_messages(self._view.normalized()), *tail]
                if format in ("openai_chat", "openai_responses"):
                    return wire.encode(view)
                return wire.encode_request(self._with_breakpoints(view, viewed=False) if cache_breakpoints else view)
            # The agent calls the model next and waits for it: the moment to load the exact tokenizer, if needed.
            self.counter.preload()
            if format in ("openai_chat", "openai_responses"):
                # The budget line changes on every call: last, after every cached block, so the prefix stays cached.
                return self._view.encoded(wire, wire.encode(tail) if tail else ())
            request = [*self._view.normalized(), *tail]
            return wire.encode_request(self._with_breakpoints(request, viewed=True) if cache_breakpoints else request)

    def status_message(self) -> Message | None:
        """The budget line for the view as prepared, or None (``policy.context_status`` off, nothing to say).

        A ``user`` message that goes last in the request and never into the history: adapters that keep the view
        as the framework's history (:meth:`prepare_messages`) add it to the request they send. Its tokens are
        counted in every decision while the line is on.
        """
        with self._lock:
            return self._status_after_view(sending=True)

    def _status_after_view(self, *, sending: bool = False) -> Message | None:
        if sending:
            self._status_uncounted = 0
        if not self.steering.has_line:
            return None  # (before reading the view: most calls have nothing to say)
        view = self._view.normalized()
        if not view or view[-1].role == "assistant":
            return None  # nothing to send, or a prefill the model continues: a note after it would cut it off
        # The figure the model reads is exact: the first line waits for a tokenizer still loading (byte upper bounds
        # can be 4x the count), once per process.
        self._count_exactly()
        tokens, _, _ = self._view.totals()
        status = self.steering.status(tokens + self._extras.tokens, self._grounded, window=self.budgets.window)
        if status is not None and sending:
            self.steering.told()
            # A line decisions did not count (``changes``) is in the provider's next usage report: record_usage knows.
            self._status_uncounted = 0 if self.steering.decision_reserve else self.counter.count_message(status)
        return status

    def prepare_messages(self) -> list[Message]:
        """The view as Message objects (for framework adapters), compacting first when the policy says so.

        The budget line is not among them (it never enters a history): see :meth:`status_message`.
        """
        with foreground, self._lock:
            self._prepare_view()
            if self._redacts_model_input():
                redacted: list[Message] = self.redactor.redact_messages(self._view.normalized())
                return redacted
            return self._view.handed()

    def _prepare_view(self) -> None:
        """Apply a finished background compaction and the policy, inside the model call's span."""
        self._calls += 1
        self._economics.called(self._calls)
        with self.tracer.span(CALL_SPAN, kind=CALL_KIND, call=self._calls, model=self.model.name) as span:
            if self._calls == 1:
                self._apply_stored_limit()
            rewrites = (self._compactions, self._masking.count)
            self._apply_idle_result()
            if self.cache is not None:
                mark_lost_refs(self._view, self.cache)  # free unless the store reports a loss (a Redis restart)
                self._limit.restore_if_lost()  # (the learned limits, written again for the next manager)
            if self._widening is not None and self._widening.active:
                self._widening.narrow(self._view)  # decide on the view the history holds, never on a widened one
            self._provider_items.clear_old_reasoning(self._view, policy=self.policy, budgets=self.budgets,
                                                     counter=self.counter, total=self.tokens,
                                                     archive=self._archive_transcript)
            self._run_policy()
            if self._warm_after_policy:
                # After the policy: what a compaction took away is never masked, its secrets are learned (the
                # compaction's catch-up), and it was read for nothing when submitted before, on the background
                # thread, which took the GIL whenever the compaction's C calls let it go (issue 22: ~0.5 s of CPU in
                # the first prepare() of 100,000 recorded messages, and the compaction slowed by as much). (The job
                # starts once this call returns, as it did; a masking's originals are still read for their secrets.)
                self._warm_after_policy = False
                self._warm_for_compaction(still_in_view=self._compactions != rewrites[0])
            self._keep_media_within_limits()
            if self._widening is not None:
                rewrote = (self._compactions, self._masking.count) != rewrites
                if self._economics.may_widen(self._view, rewrote=rewrote):
                    tokens, _, _ = self._view.totals()
                    line = self.steering.status_reserve - self.steering.decision_reserve  # a line may follow the view
                    limit = self._widening.limit(self.policy.answered_output_tokens, self.budgets.window)
                    if self.policy.answered_output_tokens is None:
                        limit = self._economics.widen_limit(limit, self._widening.cap(self.budgets.window))
                    self._widening.widen(self._view,
                                         room=self.budgets.hard - self._grounded(tokens + self._tool_tokens) - line,
                                         limit=limit)
                self._economics.previous_transient = self._widening.active
            tokens, _, count = self._view.totals()
            self._prepared_version = self._view.version
            span.set(tokens=self._grounded(tokens + self._tool_tokens), messages=count,
                     window=self.budgets.window, compactions=self._compactions, maskings=self._masking.count)

    def _redacts_model_input(self) -> bool:
        return self.redactor is not None and bool(getattr(self.redactor, "apply_to_model", False))

    def tokens(self) -> int:
        """Tokens of the view as it would be sent now (tool schemas and budget line included), grounded in usage.

        Decisions may count the budget line at its longest (``Steering.decision_reserve``); this is what goes out.
        """
        with self._lock:
            self._count_exactly()
            tokens, _, _ = self._view.totals()
            sent = tokens + self._extras.tokens
            if self.steering.status_on:
                status = self._status_after_view()
                sent += self.counter.count_message(status) if status is not None else 0
            return self._grounded(sent)

    def _grounded(self, counted: int) -> int:
        g = self._grounding
        if g is not None and g[0] == self._view.version and len(self._view) >= g[1]:
            return max(0, counted + g[2])
        return counted

    def _plan(self) -> tuple[Plan, int, int, int, int]:
        """The policy's decision now, with (view tokens, grounded total, tool-output tokens, message count)."""
        from ..compaction import Action, decide

        tokens, tool_tokens, count = self._view.totals()
        total = self._grounded(tokens + self._tool_tokens)
        plan = self.provider_context.gate(decide(total, count, tool_tokens, self.budgets, self._effective_policy()),
                                          total)
        if plan.action is not Action.NONE and self.counter.provisional:
            # Byte upper bounds said "act": only exact counts may decide how (the bounds can be 4x too high).
            self._count_exactly()
            return self._plan()
        return plan, tokens, total, tool_tokens, count

    def _count_exactly(self) -> None:
        """Wait for the exact tokenizer (a lazy counter counts byte upper bounds while it loads)."""
        if self.counter.provisional:
            self.counter.wait_exact()

    @property
    def _tool_tokens(self) -> int:
        """Tokens a request carries besides the view, as decisions count them.

        The request extras (tool schemas, instructions in their own field, a response format), and the budget line at
        its longest when it goes out on every call (``always``).
        """
        return self._extras.tokens + self.steering.decision_reserve

    @property
    def request_extras_tokens(self) -> int:
        """Tokens of what every request carries beside the messages (see :meth:`set_request_extras`)."""
        with self._lock:
            return self._extras.tokens

    def set_request_extras(self, *, tools: Sequence[Mapping[str, Any]] = (), instructions: str | None = None,
                           response_format: Mapping[str, Any] | None = None) -> bool:
        """What every request carries beside the messages, counted against the window with the view.

        ``tools``: the tool schemas sent (any provider's shape); ``instructions``: a system prompt sent in a field of
        its own (Responses ``instructions=``, Anthropic ``system=``) rather than as a message of the view;
        ``response_format``: a structured-output JSON schema. Each call states them all (what is not passed is not
        sent). Adapters and client wrappers call it with what they send; call it yourself when you call
        ``prepare()`` and pass these to the API. Returns True when their token count changed.
        """
        from ..steering import schema_tool_names

        with self._lock:
            before = self._extras.tokens
            if not self._extras.set(tools=tools, instructions=instructions, response_format=response_format):
                return False
            self.steering.declared_tools = schema_tool_names(self._extras.tools)  # notes name only tools it has
            return self._extras.tokens != before

    @property
    def tools(self) -> list[Mapping[str, Any]]:
        """The tool schemas every request carries (``tools=`` at construction, or the last ``set_request_extras``)."""
        return self._extras.tools

    def _run_policy(self) -> None:
        from ..compaction import Action, decide
        from ..telemetry import TokenEstimate, TriggerDecision

        started = time.perf_counter()
        plan, tokens, total, tool_tokens, count = self._plan()
        self.last_plan = plan
        system, developer = self._view.pinned_tokens()
        self.tracer.emit_new(TokenEstimate, messages=tokens - system - developer, tools_schema=self._extras.tokens,
                             system=system, developer=developer, model=self.model.name,
                             context_window=self.budgets.window)
        # The new messages are read ahead once the policy has acted (see _prepare_view).
        self._warm_after_policy = bool(self._unwarmed) and total >= self.budgets.soft * _WARM_AT_SHARE_OF_SOFT
        if plan.action is Action.NONE:
            self._masking.due(self.budgets)
            return
        self.tracer.emit_new(TriggerDecision, triggered=True, action=str(plan.action), reason=plan.reason,
                             tokens=total, threshold_tokens=self._threshold(plan), policy=self._policy_summary)
        if self.cache is not None and plan.action is not Action.EMERGENCY:
            # Masking loses nothing (every output stays readable by ref), so it goes first: down to the tool-output
            # budget, and when the view is over soft, far enough to get it back under soft with some headroom.
            forced = total > self.budgets.hard
            if plan.action is Action.MASK:
                masked = self._masking.mask(self.budgets.tool_output_budget, self.budgets,
                                            required=self.policy.clear_at_least, total=total, forced=forced)
            else:
                masked = self._masking.before_summary(total, tool_tokens, self.budgets,
                                                      min_saving=self._compactor.min_saving(total))
            if masked == "waits":
                return  # under hard, a rewrite that does not pay for the cache waits; a summary would cost more
            tokens, tool_tokens, count = self._view.totals()
            total = self._grounded(tokens + self._tool_tokens)
            if masked == "applied":
                # A floor like the one a compaction leaves (below): a summary in a later call waits until the view
                # has grown clear_at_least since this batch (issue 25: one a few calls after it paid the cache again
                # and summarized outputs the batch had just masked; claude4sonnet at OpenAI's rates 99.0 -> 99.4%)
                self._compactor.floor = total
        else:
            forced, masked = False, "skipped"
        if plan.action is not Action.EMERGENCY:
            # Masking has done what it could (protected, excluded and recent outputs stay; there may be no cache):
            # decide again with nothing left to mask, or a MASK plan would leave the view over its threshold.
            plan = self.provider_context.gate(decide(total, count, 0, self.budgets, self._effective_policy()), total)
            self.last_plan = plan
            if plan.action is Action.NONE:
                return
        # The masking the hard threshold forced has paid for rewriting the history; a compaction still due joins it
        # in this call (one rewrite, not two a few calls apart), whatever the cache economics and the floor: the hard
        # one (it lands lowest) when the masking left the view above halfway to hard, else the soft one.
        joined = forced and masked == "applied" and plan.action is Action.SOFT and self._economics.joins_forced()
        if joined and total > (self.budgets.soft + self.budgets.hard) // 2:
            plan = decide(self.budgets.hard + 1, count, 0, self.budgets, self._effective_policy())
        if plan.action is Action.SOFT and self.defer_soft:
            return  # someone else compacts (last_plan says it is due)
        floor = self._compactor.floor
        if (plan.action is Action.SOFT and not joined and masked != "applied" and floor is not None
                and total - floor < self.policy.clear_at_least):
            # The view grew too little since the last rewrite (a compaction, or a masking batch in an earlier call)
            # for a summary to pay off; hard still fires. A summary in the batch's own call joins its rewrite.
            return
        rank = _COMPACTION_RANK[plan.action]
        # A view over hard is never handed to the model while a compaction could still help, stalled or not.
        if total <= self.budgets.hard and not joined and self._compactor.stall_holds(total, count, rank):
            return
        if plan.action in (Action.HARD, Action.EMERGENCY):
            self._warn_emergency(plan)
        from ..errors import ContextfoldError

        try:
            report = self._compact(str(plan.action), instructions=None, started=started, automatic=True,
                                   joined=joined)
            if joined and not report.compacted and plan.action is not Action.SOFT:
                # Keep counts held the hard compaction where the view is: the soft summary of the oldest part joins.
                plan = decide(total, count, 0, self.budgets, self._effective_policy())
                rank = _COMPACTION_RANK[plan.action]
                report = self._compact(str(plan.action), instructions=None, started=started, automatic=True,
                                       joined=True)
        except ContextfoldError as exc:
            if self.policy.on_compaction_failure == "raise":
                raise
            # 004 §1 graceful degradation: the failure is already a compact.error event (and counts towards the
            # circuit breaker); the model gets the view as it is, and a real overflow goes to overflow recovery.
            _log.warning("compaction failed (%s: %s); sending the view uncompacted", type(exc).__name__, exc)
            return
        if not report.compacted and self._economics.waited:
            return  # waiting for the cache to pay is not a stall: the next calls weigh it again
        after, _, total, _, count = self._plan()
        # Still over the trigger that fired (or a higher one): compacting again before the view grows would loop.
        stuck = _COMPACTION_RANK.get(after.action, 0) >= rank
        self._compactor.note_stall(after if stuck else None, total, count, rank)

    @property
    def paused(self) -> bool:
        """The circuit breaker: automatic compaction stops after repeated failures (see :class:`Compactor`).

        It half-opens after ``policy.circuit_cooldown_s``: the next compaction is tried, a success closes it, one more
        failure opens it again for another cool-down.
        """
        return self._compactor.paused

    @paused.setter
    def paused(self, value: bool) -> None:
        self._compactor.paused = value

    def _warn_emergency(self, plan: Plan) -> None:
        """Full compaction at the start of a turn is the emergency path of 002 §Phase 2: log it and report it."""
        from ..telemetry import CompactWarning

        message = (f"{plan.action} compaction before the model call: {plan.reason} (idle compaction did not keep the "
                   "view under the threshold)")
        _log.warning(message)
        self.tracer.emit(CompactWarning(session_id=self.session_id, message=message, code="emergency"))

    @property
    def summarizer(self) -> Summarizer:
        """The summarizer compactions use (the default extractive one is built when first needed)."""
        summarizer = self._summarizer
        if summarizer is None:
            from ..summarize import ExtractiveSummarizer

            summarizer = self._summarizer = ExtractiveSummarizer()
        return summarizer

    @summarizer.setter
    def summarizer(self, value: Summarizer) -> None:
        self._summarizer = value

    def _warm_for_compaction(self, *, still_in_view: bool = False) -> None:
        """Read new messages on the background thread as the coming maskings will: secrets, digests, the calls.

        ``still_in_view``: only those the view still holds (after a compaction, which learned every secret: the
        others will never be masked).
        """
        from .. import _background
        from ._compactor import warm_for_compaction
        from ._read_ahead import run_parts

        messages, self._unwarmed = self._unwarmed, []
        # Only what add() did not redact is redacted ahead (issue 22: looking the others up again was ~40 ms of CPU
        # per 1M tokens in the lm32b loop; a secret learned since is looked for by the next use of the ledger).
        unredacted, self._unredacted = messages[:self._unredacted], 0
        if still_in_view:
            held = set(map(id, self._view.raw))
            messages = [m for m in messages if id(m) in held]
            unredacted = [m for m in unredacted if id(m) in held]
        # What a masking turn needs is read ahead: every message's secrets, the outputs' digests, the calls' access.
        # What only a compaction needs (the messages added before half the soft threshold read for the summary, the
        # transcript lines) is left to the compaction, which reads what add() did not (issue 22: ~200 ms of the
        # read-ahead's ~1,000 per 1M tokens in the lm32b loop, where 6 turns of 1,390 compact; a cold compaction
        # reads all of it within its own bar, bench/bench_compaction.py).
        redactor = self.redactor if self.redactor is not None and hasattr(self.redactor, "redact_ahead") else None
        # Tool outputs' digest material only when masking is automatic: the coming maskings digest them (add()
        # never reads it: most outputs of a session that only compacts are never masked).
        masks = self.cache is not None and self.policy.mask_digest_tokens and self.policy.auto
        outputs = self.cache if masks else None
        # (Each output's digest material once a masking can take it soon: see _read_ahead.)
        digests = self._held_outputs.release(messages, self.policy.keep_tool_io_pairs, self.counter.count_message,
                                             self.policy.mask_digest_tokens) if masks else []
        parts: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []  # (one job: see _read_ahead.run_parts)
        if redactor is not None or outputs is not None:
            parts.append((warm_for_compaction, (messages, False, redactor, False, outputs,
                                                self.policy.mask_digest_tokens if masks else 0, self.counter.counter,
                                                None, digests, unredacted)))
        if redactor is not None:
            parts.append((self._secrets.read_ahead, ()))  # whole outputs cut before add() started reading
        if masks and self.steering.superseded:
            parts.append((self.steering.read_calls_ahead, (messages,)))  # (each call's access, as masking orders)
            fold = self._masking.superseded_ahead()  # (the prefix's superseded reads, after a rewrite)
            if fold is not None:
                parts.append(fold)
        if parts:
            _background.submit(run_parts, parts)

    def _never_masked(self) -> frozenset[str] | None:
        """The tools whose outputs automatic masking never takes; None when masking is not automatic."""
        p = self.policy
        if self.cache is None or not p.auto or not p.enabled:
            return None
        return frozenset((*p.exclude_tools, *p.protected_tools))

    def _effective_policy(self) -> Policy:
        if self.paused and self.policy.auto:
            return self.policy.model_copy(update={"auto": False})
        return self.policy

    def check(self, where: str = "check") -> Plan:
        """Decide without acting: the event says what the policy would do.

        With ``background`` on and the view over the soft threshold, soft compaction starts on a worker thread.
        """
        from ..compaction import Action
        from ..telemetry import TriggerDecision

        with self._lock:
            plan, _, total, _, _ = self._plan()
            started = None
            idle = total >= self.policy.sleep_threshold(self.budgets.window)
            if self.background and (idle or plan.action in (Action.SOFT, Action.HARD, Action.EMERGENCY)):
                started = self.compact_in_background()
            # A check that starts nothing is only "not yet" (or "the next prepare() will"): counted, not sent.
            self.tracer.emit(TriggerDecision(session_id=self.session_id, triggered=plan.action is not Action.NONE,
                                             reason=f"{where}: {plan.reason}", action=str(plan.action),
                                             tokens=total, threshold_tokens=self._threshold(plan),
                                             policy=self._policy_summary), noop=started is None)
            return plan

    def _threshold(self, plan: Plan) -> int:
        """The threshold a decision was taken against: hard for hard and emergency compaction, soft otherwise."""
        from ..compaction import Action

        return self.budgets.hard if plan.action in (Action.HARD, Action.EMERGENCY) else self.budgets.soft

    # -- compaction: computed by the compactor, applied here -------------------------------------------------------
    def compact(self, *, force: bool = True, instructions: str | None = None, kind: str = "hard") -> CompactionReport:
        """Compact now (a manual ``/compact``), whatever the thresholds; returns a report with the figures."""
        from ._build import CompactionReport

        with self._lock:
            before_tokens, _, before_count = self._view.totals()
            if not force and self.tokens() < self.budgets.soft:
                return CompactionReport.unchanged(before_tokens, before_count)
            return self._compact(kind, instructions=instructions, started=time.perf_counter())

    def _compact(self, kind: str, *, instructions: str | None, started: float,
                 automatic: bool = False, joined: bool = False) -> CompactionReport:
        from ._collector import collector_paused

        # (a long history's compaction keeps all it builds until it returns: collections then free nothing of it)
        with (self.tracer.span(f"compact.{kind}", kind=COMPACT_KIND, automatic=automatic) as span,
              collector_paused(self._view.totals()[2])):
            report = self._compact_in_span(kind, instructions=instructions, started=started, automatic=automatic,
                                           joined=joined)
            span.set(applied=report.compacted > 0, tokens_before=report.tokens_before,
                     tokens_after=report.tokens_after, messages_before=report.messages_before,
                     messages_after=report.messages_after, compacted=report.compacted)
        if report.compacted:
            self.tracer.wake()  # the compaction's events go out now, not after the batch delay
        return report

    def _compact_in_span(self, kind: str, *, instructions: str | None, started: float,
                         automatic: bool, joined: bool = False) -> CompactionReport:
        from ..errors import ContextfoldError
        from ..steering import without_receipts
        from ..summarize.extractive import ExtractiveSummarizer
        from ..telemetry import CompactWarning
        from ._build import CompactionReport
        from ._spans import TracedSummarizer

        self._count_exactly()
        self._secrets.catch_up()  # the summary is written from redacted text: every secret of the session known
        found = self._view.normalized()
        view = without_receipts(found)  # the last compaction's receipt: replaced by this one's, never summarized
        # The provider's last usage said the view counts more than we count: the compaction's budget, which it
        # measures with our counter, shrinks by the difference, or "nothing to compact" could leave a view the
        # provider counts over hard (a property test found 1,001 over 1,000 after a usage 1.6x our count).
        # At most half the budget, though: a larger gap is more likely a count of something else than of this view
        # (overflow recovery reports the provider's figure; compaction must still have room to work).
        tokens, _, _ = self._view.totals()
        undercount = max(0, self._grounded(tokens + self._tool_tokens) - (tokens + self._tool_tokens))
        reserved = (self._tool_tokens + self.steering.compaction_reserve
                    + min(undercount, max(0, self.budgets.hard - self._tool_tokens) // 2))
        # The view's own counts and pairs, when no receipt was taken out of it (planning does not make them again).
        counted = (self._view.counts(), self._view.pairs()) if len(view) == len(found) else None
        budget, plan = self._compactor.target(view, kind, reserved, low=self._economics.aims_low, counted=counted)
        shrunk = self._compactor.shrink_answered(view, budget, self._view.answered() if counted is not None else None)
        before_recut: list[Message] | None = None
        recut_note = ""
        if shrunk is not view:
            # Every full output is in the tool output cache under its ref: the harder cut loses nothing.
            recut = sum(1 for old, new in zip(view, shrunk, strict=True) if old is not new)
            before_recut = found
            self._view.replace(shrunk)
            recut_note = (f"the {recut} answered message{'s' if recut != 1 else ''} (tool results or the user's "
                          f"request) took over half of the compaction budget ({budget:,} tokens): each was cut to a "
                          "shorter view, readable in full by its ref")
            view = self._view.normalized()
            # the dry run was of the old view
            budget, plan = self._compactor.target(view, kind, reserved, low=self._economics.aims_low,
                                                  counted=(self._view.counts(), self._view.pairs()))
        if automatic and kind == "soft" and plan is None:
            # Declined whatever the summary says (what stays already takes too much): no summary is computed.
            early, plan = self._compactor.declined_unsummarized(
                view, budget, counted if before_recut is None else (self._view.counts(), self._view.pairs()))
            if early is not None:
                if before_recut is not None:
                    self.tracer.emit(CompactWarning(session_id=self.session_id, code="answered_recut",
                                                    message=recut_note))
                self._economics.waited = False
                self._compactor.floor = early[0] + self._tool_tokens
                return CompactionReport.unchanged(early[0], early[1], (time.perf_counter() - started) * 1000)
        try:
            result = self._compactor.run(view, kind=kind, budget=budget, plan=plan, instructions=instructions,
                                         summarizer=TracedSummarizer(
                                             self._secrets.guard(self.summarizer), self.tracer,
                                             local=isinstance(self.summarizer, ExtractiveSummarizer)),
                                         compaction_count=self._compactions)
        except ContextfoldError:
            if before_recut is not None:
                self._view.replace(before_recut)  # a compaction that fails leaves the view as it found it
            raise
        if before_recut is not None:
            self.tracer.emit(CompactWarning(session_id=self.session_id, code="answered_recut", message=recut_note))
        # Nothing compactable, or (automatic soft) summarizing what masking already shrank would save too little
        # to be worth a prompt-cache miss: keep the view, and wait until it has grown (or hard compaction is due).
        # ``joined``: the compaction rides on a rewrite a forced masking has paid for; it still has to save enough
        # to be worth losing detail over (it would not, when keep counts hold the view where it is).
        self._economics.waited = False
        saved = result.stats.tokens_before - result.stats.tokens_after
        declined = automatic and (
            (kind == "soft" and not (self._compactor.worth_applying(result)
                                     and (joined or self._soft_pays(view, result))))
            # a hard compaction joining a forced masking must buy at least one call of room for what it loses
            or (joined and kind != "soft" and saved < self._economics.growth_per_turn))
        if not result.changed or declined:
            if declined:
                self._compactor.floor = result.stats.tokens_before + self._tool_tokens
            elif undercount and self._grounded(tokens + self._tool_tokens) > self.budgets.hard:
                # Nothing left to compact, and the provider's last count still puts the view over hard: the count
                # cannot be met (a usage report of something else, or a view that is all pinned). Keeping it would
                # refuse every later call of the session; it is dropped, said, and the next usage report counts.
                self._grounding = None
                self.tracer.emit(CompactWarning(
                    session_id=self.session_id, code="usage_count_dropped",
                    message=f"the provider's last count exceeds our count of this view by {undercount:,} tokens and "
                            f"nothing is left to compact; that count is set aside until the next usage report"))
            stats = result.stats
            return CompactionReport.unchanged(stats.tokens_before, stats.messages_before,
                                              (time.perf_counter() - started) * 1000)
        return self._apply(view, result, started)

    def _keeps_wide(self, index: int, wide: Message, standard: Message) -> bool:
        """Whether the wider answered output at ``index`` of the history stays (``CacheEconomics.keeps_wide``)."""
        tokens, _, _ = self._view.totals()
        return self._economics.keeps_wide(self._view.raw, index, wide, standard,
                                          tokens=self._grounded(tokens + self._tool_tokens),
                                          pinned=sum(self._view.pinned_tokens()), hard=self.budgets.hard)

    def _soft_pays(self, view: list[Message], result: CompactionResult) -> bool:
        """Whether an automatic soft compaction pays for the prompt cache it invalidates (``CacheEconomics``)."""
        if not self._economics.enabled or not result.changed:
            return True
        first = next((i for i, (old, new) in enumerate(zip(view, result.messages, strict=False)) if old is not new),
                     min(len(view), len(result.messages)))
        stats = result.stats
        return self._economics.weigh(view, action="soft", change_at_index=first,
                                     freed=stats.tokens_before - stats.tokens_after,
                                     tokens=stats.tokens_before + self._tool_tokens,
                                     pinned=sum(self._view.pinned_tokens()), hard=self.budgets.hard).act

    def _apply(self, view: list[Message], result: CompactionResult, started: float) -> CompactionReport:
        """Replace ``view`` by the compacted one: the hook first, then the transcript archived, then the events."""
        from ..steering import insert_receipt
        from ..telemetry import CompactWarning, MessagesPruned, SummaryCreated
        from ._build import CompactionReport

        self._run_before_compaction(result)
        number = self._archive_transcript(view)
        covered = result.summary_message.meta.get("compacted_count") if result.summary_message is not None else None
        receipt = self.steering.receipt(result.summarized or result.removed,
                                        covered if isinstance(covered, int) else None)
        self._view.replace(insert_receipt(result.messages, receipt) if receipt is not None else result.messages)
        self.steering.note_compacted(result.stats.compacted_count)
        self._compactions += 1
        self._compactor.floor = result.stats.tokens_after + self._tool_tokens
        stats = result.stats
        if result.summary is not None:
            self._archiver.summary(number, {"summary": result.summary.summary, "retain": list(result.summary.retain),
                                            "summarizer": result.summary.summarizer, "stats": stats.to_dict()})
            self.tracer.emit(SummaryCreated(
                session_id=self.session_id, strategy=self.policy.strategy, input_messages=stats.compacted_count,
                input_tokens=stats.tokens_before, summary_tokens=stats.summary_tokens,
                summary=self._archiver.redact_text(result.summary.summary), model=result.summary.summarizer,
                summary_version=stats.summary_version))
        self.tracer.emit(MessagesPruned(session_id=self.session_id, count=len(result.removed),
                                        ids=tuple(str(m.meta.get("id", "")) for m in result.removed),
                                        kept={**stats.kept, "recent_turns": stats.keep_turns,
                                              "tool_pairs": stats.keep_pairs},
                                        protected=protected_names(result.messages)))
        for warning in result.warnings:
            self.tracer.emit(CompactWarning(session_id=self.session_id, message=warning, code="compaction"))
        duration = (time.perf_counter() - started) * 1000
        return CompactionReport(stats.tokens_before, stats.tokens_after, stats.messages_before, stats.messages_after,
                                stats.compacted_count, duration, result.summary, kept=dict(stats.kept))

    def _run_before_compaction(self, result: CompactionResult) -> None:
        """The application's pre-compaction hook (002: consolidate facts before messages leave the view).

        It sees the messages about to leave and the summary replacing them; a failing hook is reported, never
        allowed to stop the compaction (the archive keeps everything anyway).
        """
        from ..telemetry import CompactWarning

        hook = self.before_compaction
        if hook is None or not result.removed:
            return
        try:
            hook(list(result.removed), result.summary)
        except Exception as exc:  # the application's code: report it and go on
            self.tracer.emit(CompactWarning(session_id=self.session_id, code="hook_failed",
                                            message=f"before_compaction hook failed: {type(exc).__name__}: {exc}"))

    def _archive_transcript(self, view: list[Message]) -> int:
        number = self._archiver.transcript(view)
        self._archived_seq = self._seq  # every message added so far is now in an archived transcript
        return number

    def _archive_dropped(self) -> None:
        """Archive what normalization removed for good (a result whose call was compacted away, a duplicate)."""
        dropped, self._view.dropped = self._view.dropped, []
        self._archiver.dropped(dropped)

    # -- idle-time compaction -------------------------------------------------------------------------------------
    def compact_in_background(self) -> Future[CompactionResult] | None:
        """Start a soft compaction on a worker thread when the view is over the sleep threshold (50% of the window).

        The result is applied by the next ``prepare()`` only if the view has not been rewritten meanwhile (new
        messages appended at the end are fine: they are kept after the compacted part); otherwise it is dropped
        and the policy plans again. Returns the future, or None when there is nothing to do.
        """
        from ._compactor import compact_after_boundary

        with self._lock:
            # Idle ("sleep") compaction has its own threshold (policy.sleep_pct, 002 §Phase 1).
            sleep = self.policy.sleep_threshold(self.budgets.window)
            automatic = self.policy.enabled and self.policy.auto
            if self._idle.pending or not automatic or self.paused or self.tokens() < sleep:
                return None
            from ..steering import without_receipts

            snapshot = self._view.normalized()
            compactable = without_receipts(snapshot)  # the last receipt is replaced by the new one, not summarized
            # (The summary is computed away from the lock: the summarizer learns the whole view's secrets itself.)
            summarizer, count = self._secrets.guard(self.summarizer, context=snapshot), self._compactions
            budget = self.budgets.hard - self._tool_tokens - self.steering.compaction_reserve
            policy = self._compactor.policy  # per-tool rules included (summarize: false)
            return self._idle.start(snapshot, self._view.version, lambda: compact_after_boundary(
                compactable, policy=policy, counter=self.counter, summarizer=summarizer, budget=budget,
                kind="soft", compaction_count=count, clock=self._clock))

    def _apply_idle_result(self) -> None:
        if not self._idle.pending:
            return  # (every prepare() asks: reading the whole view for nothing would cost O(history) per call)
        from ..telemetry import CompactWarning

        outcome = self._idle.take(self._view.normalized(), self._view.version)
        if outcome is None:
            return
        if outcome.error is not None:
            self._compactor.failed_with(outcome.error)
            return
        if outcome.discarded or outcome.result is None:
            self.tracer.emit(CompactWarning(session_id=self.session_id, code="idle_discarded",
                                            message="background compaction dropped: the view changed meanwhile"))
            return
        if not self._compactor.worth_applying(outcome.result):
            self._compactor.floor = outcome.result.stats.tokens_before + self._tool_tokens  # too little saved
            return
        self._apply(list(outcome.snapshot), with_tail(outcome.result, outcome.tail), time.perf_counter())

    # -- overflow recovery ----------------------------------------------------------------------------------------
    def shrink_for_overflow(self, prompt_tokens: int | None = None, limit: int | None = None) -> CompactionReport:
        """Make the view smaller after the provider said it is too long (see :mod:`contextfold.recovery`).

        Uses the counts from the error, when given, to correct the estimate first.
        """
        from ..errors import RecoveryFailed

        with self._lock:
            if not self.policy.may_compact_on_overflow:
                raise RecoveryFailed("the provider reported a context overflow, but automatic compaction is off "
                                     "(Policy(auto=False) or enabled=False); set allow_on_overflow=True (and "
                                     "enabled=True) to let recovery compact")
            if self.paused:
                raise RecoveryFailed(f"automatic compaction is paused after {self._compactor.failed} failed "
                                     "compactions in a row (circuit breaker)")
            if prompt_tokens is not None:
                tokens, _, count = self._view.totals()
                self._grounding = (self._view.version, count, prompt_tokens - tokens - self._tool_tokens)
            if self._widening is not None and self._widening.active:
                # The compaction decides on the history's own view (the provider's count above was of the wider
                # one: the grounding goes with the version it was taken on).
                self._widening.narrow(self._view)
            return self._compact("hard", instructions=None, started=time.perf_counter())

    # -- the provider's learned limit ------------------------------------------------------------------------------
    @property
    def learned_limit(self) -> int | None:
        """The most tokens (view and request extras, by our count) the provider was found to accept, or None."""
        with self._lock:
            return self._limit.load()

    def learn_limit(self, tokens: int, *, provider_limit: int | None = None, shared: int | None = None) -> bool:
        """The provider accepts at most ``tokens`` (our count of the view plus tool schemas): keep under it.

        Overflow recovery calls it with what each context-length error teaches. The thresholds become those of the
        learned limit (``budgets``), so later turns compact before they reach it and the answered output is never
        widened past it; the limit is kept in the blob store for the model, where other sessions, a restarted
        process or another worker find it. It only goes down; True when it did. ``shared``: the part of it that
        holds for every caller of the model, stored instead of ``tokens`` when given (what this session's own
        ``max_tokens`` took off stays with this manager).
        """
        for name, value in (("tokens", tokens), ("shared", shared)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                from ..errors import ConfigError

                raise ConfigError(f"must be a positive number of tokens, got {value!r}", field=f"learn_limit.{name}")
        with self._lock:
            previous = self._limit.load()
            if not self._limit.learn(tokens, provider_limit, shared=shared):
                return False
            self._use_limit(previous, source="error")
            return True

    @property
    def media_limits(self) -> MediaLimits:
        """The media limits in force: the provider's published ones, lowered by what its errors taught."""
        with self._lock:
            self._media.load()
            return self._media.limits

    def media(self) -> MediaTally:
        """The images and documents the view carries now (inline bytes as sent, and items)."""
        with self._lock:
            return self._media.tally(self._view.raw, self._media_version())

    def _media_version(self) -> tuple[int, int]:
        return self._view.version, self._view.settle_edits

    def learn_media_limit(self, *, max_bytes: int | None = None, max_items: int | None = None) -> bool:
        """Keep each request under ``max_bytes`` (media and text) and ``max_items`` images and documents, our count.

        The limits apply from the next ``prepare()`` on; True when one went down. Overflow recovery calls it with
        what a media error teaches (``413 request_too_large``, ``Too much media``). Limits only go down. From then
        on, whenever the view is over one, the oldest images and documents are replaced with a short text naming
        them (the originals stay in the archive), down to :data:`~contextfold.media.LOW_WATER` of it, so that the
        cached prefix is not rewritten on every turn.
        """
        from ..errors import ConfigError
        from ..media import MediaLimits

        for name, value in (("max_bytes", max_bytes), ("max_items", max_items)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ConfigError(f"must be a positive integer, got {value!r}", field=f"learn_media_limit.{name}")
        with self._lock:
            return self._media.learn(MediaLimits(max_bytes=max_bytes, max_items=max_items))

    def keep_media_within_limits(self) -> int:
        """Take the oldest images and documents out until the view is within the media limits; how many went.

        ``prepare()`` does it on every call; overflow recovery calls it after learning a limit.
        """
        with self._lock:
            return self._keep_media_within_limits()

    def _keep_media_within_limits(self) -> int:
        guard = self._media
        if not guard.may_know:
            return 0  # (a text-only agent with a provider of no published limit and no store: nothing to count)
        before = guard.tally(self._view.raw, self._media_version())
        if not before.items:
            return 0
        guard.load()  # (once, when the view first holds media: what earlier managers of the model learned)
        if not guard.limits.known:
            return 0
        tokens, _, _ = self._view.totals()
        text_tokens = tokens + self._extras.tokens
        if not guard.over(before, text_tokens):
            return 0
        from ..media import evict_oldest_media
        from ..telemetry import MediaEvicted

        never = self.policy.roles_never_prune
        evicted = 0

        def evict(view: list[Message]) -> list[Message]:
            nonlocal evicted
            last_user = max((i for i, m in enumerate(view) if m.role == "user"), default=-1)
            new, evicted = evict_oldest_media(
                view, guard.limits, text_tokens=text_tokens,
                keep=lambda i, m: i == last_user or m.protected or m.role in never)
            return new

        self.rewrite_view(evict, reason="media_limit")
        if evicted:
            after = guard.tally(self._view.raw, self._media_version())
            self.tracer.emit(MediaEvicted(session_id=self.session_id, count=evicted, bytes_before=before.bytes,
                                          bytes_after=after.bytes, items_before=before.items,
                                          items_after=after.items, max_bytes=guard.limits.max_bytes,
                                          max_items=guard.limits.max_items))
        return evicted

    def forget_learned_limit(self) -> None:
        """Forget the learned limit (here and in the store): the thresholds go back to the configured window."""
        with self._lock:
            self._limit.forget()
            self._set_budgets(self._window_budgets)

    def _apply_stored_limit(self) -> None:
        """A limit learned earlier for this model (another session, process or worker) applies from the start."""
        if self._limit.load() is not None:
            self._use_limit(None, source="store")

    def _use_limit(self, previous: int | None, *, source: str) -> None:
        from ..telemetry import RecoveryLimitLearned
        from ._limits import budgets_within

        tokens = self._limit.tokens
        assert tokens is not None
        budgets = budgets_within(self.policy, self._window_budgets.window, tokens)
        if budgets == self.budgets and source == "store":
            return
        self._set_budgets(budgets)
        self.tracer.emit(RecoveryLimitLearned(session_id=self.session_id, tokens=tokens, hard=budgets.hard,
                                              window=budgets.window, previous=previous,
                                              provider_limit=self._limit.provider_limit, source=source))

    def _set_budgets(self, budgets: Budgets) -> None:
        """Thresholds in force from now on: the manager's, its compactor's and the events' policy summary."""
        import dataclasses

        from ._build import cache_budget

        self.budgets = budgets
        self._compactor.budgets = budgets
        self._policy_summary.update(hard=budgets.hard, soft=budgets.soft)
        cache = self.cache
        if cache is not None:
            # New outputs are cut for the window really there (unless the configuration sized the cut itself).
            window = self._window_budgets
            derived = cache_budget(window.window, window.tool_output_budget)
            if cache.config.context_budget_tokens in (derived, self._cache_budget):
                self._cache_budget = cache_budget(budgets.window, budgets.tool_output_budget)
                cache.config = dataclasses.replace(cache.config, context_budget_tokens=self._cache_budget)
            cache.context_window = budgets.window

    def _limit_store_failed(self, message: str) -> None:
        from ..telemetry import CompactWarning

        _log.warning(message)
        self.tracer.emit(CompactWarning(session_id=self.session_id, message=message, code="limit_store"))

    @property
    def failed_compactions(self) -> int:
        """Compactions that failed in a row (a success resets it); overflow recovery's circuit breaker reads it."""
        return self._compactor.failed

    def rewrite_view(self, rewrite: Callable[[list[Message]], list[Message]], *, reason: str,
                     shrinks: bool = False) -> int:
        """Replace the view with ``rewrite(view)`` atomically, archiving the old view first (nothing is lost).

        Overflow recovery uses it to drop the oldest messages when compaction cannot help. Returns how many
        messages left the view. ``shrinks``: the rewrite makes room as a compaction would, so a soft compaction
        waits until the view has grown again (by ``clear_at_least``), as after one.
        """
        from ..telemetry import MessagesPruned

        with self._lock:
            view = self._view.normalized()
            new = rewrite(list(view))
            if new == view:
                return 0
            self._archive_transcript(view)
            kept = {id(m) for m in new}
            removed = [m for m in view if id(m) not in kept]
            self._view.replace(new)
            if shrinks:
                tokens, _, _ = self._view.totals()
                self._compactor.floor = tokens + self._tool_tokens
            self.tracer.emit(MessagesPruned(session_id=self.session_id, count=len(removed),
                                            ids=tuple(str(m.meta.get("id", "")) for m in removed),
                                            kept={reason: len(new)}))
            return len(removed)

    # -- usage ----------------------------------------------------------------------------------------------------
    def record_usage(self, usage: Any, *, of_current_view: bool = False) -> TokenUsage:
        """Record what the provider reported for the call made with the last prepared view.

        The reported prompt size grounds later counts only when it is of the view this manager last prepared
        (appends since are fine; a rewrite is not): a usage report counts for the view it was reported on, never
        for one this manager did not send. ``of_current_view=True``: the caller knows the report is of the view as
        it stands (a manager rebuilt from the stored view a reply answered, as the proxy does).
        """
        from ..telemetry import UsageRecorded
        from ..tokens import TokenUsage

        parsed = TokenUsage.from_any(usage)
        with foreground, self._lock:
            self._count_exactly()  # the grounding offset must be against exact counts
            self.usage_total = self.usage_total + parsed
            tokens, _, count = self._view.totals()
            counted = tokens + self._tool_tokens + self._status_uncounted
            if parsed.prompt_tokens > _IMPLAUSIBLE_PROMPT_FACTOR * self._window_budgets.window:
                from ..telemetry import CompactWarning

                self.tracer.emit(CompactWarning(
                    session_id=self.session_id, code="usage_implausible",
                    message=f"the provider reported a prompt of {parsed.prompt_tokens:,} tokens, over "
                            f"{_IMPLAUSIBLE_PROMPT_FACTOR}x the window of {self._window_budgets.window:,}: no request "
                            "it accepted; token counts stay contextfold's own"))
            elif parsed.prompt_tokens > 0 and (of_current_view or self._prepared_version == self._view.version):
                self._grounding = (self._view.version, count, parsed.prompt_tokens - counted)
            self.tracer.emit(UsageRecorded(session_id=self.session_id, model=self.model.name,
                                           input_tokens=parsed.input, output_tokens=parsed.output,
                                           cache_read_tokens=parsed.cache_read,
                                           cache_write_tokens=parsed.cache_creation, estimated_input_tokens=counted))
            self.check("after model call")
        return parsed

    # -- inspection -----------------------------------------------------------------------------------------------
    def status(self) -> Status:
        """Layers of the view (pinned, summary version, recent) and usage as a share of the window."""
        from ._build import Status

        with self._lock:
            view = self._view.normalized()
            tokens = self.tokens()
            summaries = [m for m in view if m.kind == "summary"]
            version = int(summaries[-1].meta.get("summary_version", 0)) if summaries else 0
            pinned = sum(1 for m in view if m.role in self.policy.roles_never_prune or m.protected)
            return Status(session_id=self.session_id, model=self.model.name, window=self.budgets.window,
                          tokens=tokens, usage_pct=round(100 * tokens / self.budgets.window, 1),
                          messages=len(view), pinned=pinned, summary_version=version,
                          recent=len(view) - pinned - len(summaries), compactions=self._compactions,
                          maskings=self._masking.count, paused=self.paused)

    @property
    def compactions(self) -> int:
        """Compactions applied in this session."""
        return self._compactions

    @property
    def maskings(self) -> int:
        """Masking passes applied in this session."""
        return self._masking.count

    def stored_messages(self) -> list[Message]:
        """The messages to persist to continue this session elsewhere (:meth:`adopt`).

        The view as stored: its tail is not normalized yet, so a call waiting for its result has no "aborted"
        placeholder. The session's secret memory is brought up to date and saved first: the manager that adopts
        these messages never reads them (nor the whole outputs their write-time views cut) for secrets again.
        """
        with self._lock:
            self._secrets.catch_up()
            return list(self._view.raw)

    def adopt(self, messages: Sequence[Message]) -> None:
        """Continue a session from :meth:`stored_messages` saved by another manager (another worker, a restart).

        The messages are taken as they are: no write-time truncation again, ids and refs kept. Call it on a fresh
        manager, before adding anything.
        """
        with self._lock:
            if len(self._view):
                raise ValueError("adopt: the manager already holds messages; adopt on a fresh manager")
            from ..provider_context import mark

            stored = [self._without_foreign_ref(mark(m)) for m in messages]
            self._view.replace(stored)  # (not append: "aborted" placeholders must be known, for late results)
            self._provider_items.note(stored)
            versions = [int(m.meta.get("summary_version", 0)) for m in stored if m.kind == "summary"]
            self._compactions = max(versions, default=0)  # the next summary continues the numbering

    def archive_view(self) -> int | None:
        """Archive the view as it stands (and whatever normalization dropped); the transcript's number, if any.

        With the final view archived, the archive alone gives back the whole session, whichever process held it.
        """
        with self._lock:
            view = self._view.normalized()
            self._archive_dropped()
            return self._archive_transcript(view) if self.archive is not None else None

    def redact_outgoing(self, value: Any) -> Any:
        """``value`` (text or JSON-like data) as it may leave the process: redacted like this session's telemetry.

        Every secret the session has seen so far is known (the session's memory is brought up to date first), and
        personal data goes too unless redaction says ``personal_data="nowhere"``. For what an application builds
        from the session and sends on (a report, a transcript excerpt). Unchanged when redaction is off.
        """
        redactor = self.redactor
        if redactor is None or not getattr(redactor, "enabled", True):
            return value
        with self._lock:
            self._secrets.catch_up()
        outgoing = redactor.for_telemetry() if hasattr(redactor, "for_telemetry") else redactor
        return outgoing.redact_obj(value)

    def messages(self) -> list[Message]:
        """The stored view as Message objects, without compacting (a snapshot)."""
        with self._lock:
            return self._view.normalized()

    def breakpoint_indices(self) -> list[int]:
        """The indices of :meth:`messages` that ``prepare(cache_breakpoints=True)`` marks with ``cache_control``.

        What the replay bills (:func:`contextfold.billing.breakpoints.breakpoint_indices`, with the outputs this
        session's masking will never take); a caller's own marks switch them off, which this does not check.
        """
        from ..billing.breakpoints import breakpoint_indices

        with self._lock:
            view = self._view.normalized()
            return breakpoint_indices(view, settled=self._masking.settled(), bridge=self._masking.bridge(view))

    def _with_breakpoints(self, messages: list[Message], *, viewed: bool) -> list[Message]:
        """The request's messages with contextfold's cache breakpoints, unless the caller placed its own.

        ``viewed``: the request is the view's messages then the budget line (masking reads what the view keeps).
        """
        from ..billing.breakpoints import carries_marks, mark_breakpoints

        if carries_marks(messages):
            return messages
        return mark_breakpoints(messages, settled=self._masking.settled(None if viewed else messages),
                                bridge=self._masking.bridge(messages))

    def finish(self) -> None:
        """The agent is done: run the final check, wait for background work, archive the final view, flush.

        With the final view archived, the archive alone gives back the whole session (``archive restore``).
        Telemetry gets what is left of its deadline (1 s by default) once this work is done.
        """
        self._finish(time.monotonic(), flush=True)

    def _finish(self, started: float, *, flush: bool) -> None:
        from ..telemetry import FanoutTelemetry

        with self._lock:
            self._apply_idle_result()
            self.check("before finish")
        self._idle.shutdown()
        with self._lock:
            self._apply_idle_result()
            if self._seq > self._archived_seq and self.archive is not None:
                self._archive_transcript(self._view.normalized())
        self.tracer.finish_session()
        sink = self.tracer.telemetry
        if not flush:
            return
        if isinstance(sink, FanoutTelemetry):
            sink.flush(since=started)  # bounded: a frozen exporter cannot hold the end of the session
        else:
            flush_sink = getattr(sink, "flush", None)
            if callable(flush_sink):
                flush_sink()

    def close(self) -> None:
        """Finish, then release everything: exporter threads joined, retention run, stores closed (idempotent).

        Telemetry shares one deadline with the finishing work (no flush before the shutdown: it exports what is
        queued), so a frozen exporter cannot hold the end of the session.
        """
        if self._closed:
            return
        from ..telemetry import FanoutTelemetry
        from ._release import release_resources

        started = time.monotonic()
        try:
            self._finish(started, flush=False)
        finally:
            self._closed = True
            sink = self.tracer.telemetry
            if isinstance(sink, FanoutTelemetry):
                sink.shutdown(since=started)  # release_resources' own shutdown() then finds the sinks stopped
            release_resources(self)

    # -- async: the same calls on a worker thread ---------------------------------------------------------------
    # Summarization can take seconds (an LLM call): on a thread, it never holds the event loop. asyncio is imported
    # by the first async call, not by `import contextfold` (it is a fifth of a bare import's time).
    async def aadd(self, messages: Iterable[Message | Mapping[str, Any]] | Message | Mapping[str, Any], *,
                   format: str | None = None) -> None:
        """Async :meth:`add`."""
        import asyncio

        await asyncio.to_thread(self.add, messages, format=format)

    async def aprepare(self, format: str = "openai_chat", *, cache_breakpoints: bool = False) -> Any:
        """Async :meth:`prepare` (summarization runs on a worker thread, never on the event loop)."""
        import asyncio

        return await asyncio.to_thread(self.prepare, format, cache_breakpoints=cache_breakpoints)

    async def aprepare_messages(self) -> list[Message]:
        """Async :meth:`prepare_messages`."""
        import asyncio

        return await asyncio.to_thread(self.prepare_messages)

    async def acompact(self, *, force: bool = True, instructions: str | None = None,
                       kind: str = "hard") -> CompactionReport:
        """Async :meth:`compact`."""
        import asyncio

        return await asyncio.to_thread(self.compact, force=force, instructions=instructions, kind=kind)

    async def arecord_usage(self, usage: Any, *, of_current_view: bool = False) -> TokenUsage:
        """Async :meth:`record_usage` (no I/O: runs inline)."""
        return self.record_usage(usage, of_current_view=of_current_view)

    def __enter__(self) -> ContextManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# A compaction reads at most the first 200 and the newest 800 messages of what it summarizes (summarize/digest.py,
# MAX_READ_MESSAGES), and the archive redacts a history in bulk (Redactor.redact_messages). Of one add() of more
# (a resumed or imported history of 100,000 messages), reading every message ahead would cost more than both.
_READ_AHEAD_HEAD = 200
_READ_AHEAD_MAX = 1_000

# A bulk add counts its new messages by batches of this many as it stores them (see ContextManager._add): well within
# what the counter remembers of long texts (tokens/counting._LONG_COUNTS_MAX), few enough calls to cost nothing.
_COUNT_AFTER_STORED = 1_024


class _Made(NamedTuple):
    """What ``add()`` made of a message object given in its batch, for the copies of it given again (issue 22)."""

    first: Message  # the first copy as stored (its write-time steps done)
    truncated: CacheTruncated | None  # the event of its cut at write time, sent again for each copy
    given_id: str | None  # meta["id"] of the object given (the copies share it), or None: each gets its own
    large: bool  # whether it may be over policy.large_input_bytes (each copy is warned about)
    tool: bool  # a tool result (the batch then runs the policy check)
    boundary: bool  # a provider's compaction item


def _worth_reading(batch: list[Message]) -> list[Message]:
    """The messages of one add() worth reading ahead of a compaction: all of them, or the two ends of a bulk add."""
    if len(batch) <= _READ_AHEAD_MAX:
        return batch
    return [*batch[:_READ_AHEAD_HEAD], *batch[-(_READ_AHEAD_MAX - _READ_AHEAD_HEAD):]]


