"""The ContextManager: one per agent session, the one stateful object.

It owns the view (what the model sees), the tool output cache, the archive and the telemetry, and runs the flow of
a turn (DESIGN.md): ``add`` truncates big tool outputs at write time and counts only the new messages; ``prepare``
normalizes, decides, masks / summarizes / compacts when the policy says so, archives what leaves the view, and
returns the view in the caller's wire format; ``record_usage`` grounds the next decision in the provider's counts.

The concepts beside the turn are collaborators it holds: what ``add`` does with each message (:mod:`._intake`), the
compactions the policy calls for, manual and idle ones (:mod:`._compaction_runner`), the provider's learned token
and media limits (:mod:`._learned_limits`), masking (:mod:`._masking`) and the compaction engine (:mod:`._compactor`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._lazy import LazyModule
from ..provider_context import ProviderContext
from ..steering import Steering, schema_tool_names
from ..telemetry import CompactWarning
from ..telemetry._pace import foreground
from ..tokens import TokenUsage
from ._answered_view import AnsweredWidening
from ._archiver import Archiver
from ._build import build_components
from ._cache_economics import CacheEconomics
from ._compaction_runner import CompactionRunner
from ._compactor import Compactor
from ._decisions import Decisions
from ._idle import IdleCompactions
from ._intake import Intake
from ._learned_limits import LearnedLimits
from ._lost_refs import mark_lost_refs
from ._masking import Masking
from ._provider_items import ProviderItems
from ._request_extras import RequestExtras
from ._secrets import SessionSecrets
from ._spans import CALL_KIND, CALL_SPAN, session_metadata
from ._view import View
from .reconcile import FrameworkHistory

# ``from contextfold import ContextManager`` loads this module and everything building a manager of the default
# kind needs (issue 22: a process's first ``ContextManager(...)`` in a few ms, as every later one; the import stays
# within issue 15's 150 ms because no part of it is pydantic): its collaborators, the policy, the tool-output cache,
# the memory stores, the archive, redaction (without its patterns), telemetry. What only some managers or turns need
# is imported where it is used: compaction, summarizing, the redaction patterns, the wire formats other than the
# one asked for, the local and remote stores, pydantic (a configured policy, a settings file).
if TYPE_CHECKING:
    from concurrent.futures import Future

    from .. import compaction as _compaction
    from .. import formats as _formats
    from ..compaction import Budgets, CompactionResult, Plan, Policy
    from ..media import MediaLimits, MediaTally
    from ..messages import Message
    from ..summarize import Summarizer
    from ..tokens import MessageCounter
    from ._build import CompactionReport, Components, Status
    from ._exact_figures import ExactFigures
else:  # (read on every turn: imported when first used, not with the manager, then no import statement per call)
    _compaction = LazyModule("..compaction", __package__)
    _formats = LazyModule("..formats", __package__)

__all__ = ["ContextManager"]


_log = logging.getLogger(__name__)

# 48 random bits per manager: collisions between the managers of one session are out of reach.
_ID_NONCE_HEX = 12
# The nonce's hex digits with "a" written "g": no built-in secret pattern's trigger ("eaa", "acca", ":aa" are hex)
# can occur in it. One that did made every id of the manager a suspect of the redactor's prefilter, each read again
# one by one: in 0.55% of sessions, +1 s or more to the first compaction of 100,000 messages (issue 22).
_ID_NONCE_DIGITS = str.maketrans("a", "g")


def _id_nonce() -> str:
    """A manager's part of its messages' ids: 48 random bits, in which no built-in trigger can occur."""
    return uuid.uuid4().hex[:_ID_NONCE_HEX].translate(_ID_NONCE_DIGITS)


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
        parts: Components = build_components(
            model=model, max_context_tokens=max_context_tokens, policy=policy, summarizer=summarizer, store=store,
            archive=archive, telemetry=telemetry, session_id=session_id, redact=redact, clock=clock,
            tool_output=tool_output,
            counter=counter, archive_events=archive_events,
        )
        self.model = parts.model
        self.policy = parts.policy
        self.budgets = parts.budgets
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
        self._economics = CacheEconomics(policy=lambda: self.policy, model=self.model, counter=self.counter,
                                         tracer=self.tracer, session_id=self.session_id, clock=self._clock)
        self._masking = Masking(cache=self.cache, view=self._view, counter=self.counter, policy=self.policy,
                                steering=self.steering, economics=self._economics, secrets=self._secrets,
                                tracer=self.tracer, session_id=self.session_id)
        self._status_uncounted = 0  # tokens of the last budget line sent that decisions did not count
        # Ids must not repeat across managers of one session (a restarted process, another worker): the archive
        # merges transcripts by id, so a second "s1:1" would hide the first. A per-manager nonce keeps them apart.
        # Pass message_id_prefix for reproducible ids (a replay), when one process owns the session for good.
        self._intake = Intake(self, message_id_prefix or f"{self.session_id}:{_id_nonce()}")
        self._compactions = 0
        self.before_compaction = before_compaction
        self._warm_after_policy = False  # the new messages are read ahead once the policy has acted
        # Running compactions on the view: the policy's, manual ones, idle ones (see _compaction_runner).
        self._compaction = CompactionRunner(self)
        self._grounding: tuple[int, int, int] | None = None  # (view version, messages sent, reported - counted)
        # The version of the view this manager last prepared: a usage report grounds only that view (an older
        # reply's usage fed by an adapter to a new manager over a persisted history is of a view it never sent).
        self._prepared_version: int | None = None
        self.last_plan: Plan | None = None
        self._decisions = Decisions()  # (the same figures are not decided on twice)
        self._paused_policy: tuple[Policy, Policy] | None = None  # (a policy, its copy in force while paused)
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
        # The provider's token and media limits, learned from its errors and kept in the store per model (issue 21).
        self._limits = LearnedLimits(self, parts.budgets)
        self._calls = 0
        # The providers' own context management (issue 23): who compacts, what the provider reported, and which
        # providers' opaque state the view may hold (a prepare() in another format reports what it leaves out).
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

        from ..compaction import Policy
        from ..config import load_settings
        from ._build import settings_arguments

        # telemetry=a sink (not a settings mapping) goes to the constructor, like summarizer=an object.
        setting_keys = {"model", "max_context_tokens", "policy", "summarizer", "telemetry", "storage", "redaction",
                        "tool_output"}
        # tool_output as a settings mapping uses the YAML names (max_tokens, …); a CacheConfig goes to the constructor
        setting_keys = {k for k in setting_keys & set(kwargs)
                        if k in ("model", "max_context_tokens") or isinstance(kwargs[k], Mapping | BaseModel | Policy)
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

        Big tool outputs are stored whole in the cache and replaced by a view with their ref at once. All or nothing:
        when it raises (a store, the archive, the redactor's callback), none of the messages was added and a retry
        adds them once; an interrupt (a ``BaseException`` that is not an ``Exception``) too, wherever it is raised.
        Counting the view and the policy check after tool results run once they are in: those steps' errors are
        logged (the check's reported as a ``compact.warning``) and the messages stay added; the next ``prepare()``
        runs them again.
        """
        from ._build import coerce_messages
        from ._collector import collector_paused

        with foreground, self._lock:
            incoming = coerce_messages(messages, format=format, start=len(self._view),
                                       protected_flag=self.policy.protected_flag)
            # A bulk add (a resumed history) keeps everything it makes: collections during it free nothing.
            with collector_paused(len(incoming)):
                self._intake.add(incoming)

    # -- preparing ------------------------------------------------------------------------------------------------
    def prepare(self, format: str = "openai_chat", *, cache_breakpoints: bool = False) -> Any:
        """The view to send, in ``format``.

        A list of messages/items for OpenAI Chat and Responses; the request fragment for Anthropic
        (``{"system", "messages"}``) and Gemini (``{"system_instruction", "contents"}``). Compacts first when
        the policy says so; raises InsufficientBudget when even full compaction cannot fit. A failing archive does
        not stop the request: it is reported (``compact.warning``, ``code="archive_failed"``), retried next turn.
        With ``policy.context_status`` on, the budget line (:meth:`status_message`) comes last. ``cache_breakpoints``
        (Anthropic): ``cache_control`` on the pinned head, the latest summary and the last history message
        (:func:`contextfold.billing.breakpoints.mark_breakpoints`), unless a message already carries one.

        The list is the caller's, but the dicts in it are shared with the lists later calls return (the settled
        prefix is encoded once, issue 22): copy one before changing it, or the change goes out in the next requests.
        """
        wire = _formats.get_format(format)
        with foreground, self._lock:
            self._prepare_view()
            self._provider_items.report_drops(self._view, format)
            if self._view.dropped:  # what normalization removed for good goes to the archive now, not "later"
                self._archive_dropped_or_report()
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
                self._limits.apply_stored_limit()
            self._limits.expire_provisional()
            rewrites = (self._compactions, self._masking.count)
            self._compaction.apply_idle_result()
            if self.cache is not None:
                mark_lost_refs(self._view, self.cache)  # free unless the store reports a loss (a Redis restart)
                self._limits.restore_if_lost()  # (the learned limits, written again for the next manager)
            if self._widening is not None and self._widening.active:
                self._widening.narrow(self._view)  # decide on the view the history holds, never on a widened one
            self._provider_items.clear_old_reasoning(self._view, policy=self.policy, budgets=self.budgets,
                                                     counter=self.counter, total=self.tokens,
                                                     archive=self._archive_transcript)
            self._compaction.run_policy()
            if self._warm_after_policy:
                # After the policy: what a compaction took away is never masked, its secrets are learned (the
                # compaction's catch-up), and it was read for nothing when submitted before, on the background
                # thread, which took the GIL whenever the compaction's C calls let it go (issue 22: ~0.5 s of CPU in
                # the first prepare() of 100,000 recorded messages, and the compaction slowed by as much). (The job
                # starts once this call returns, as it did; a masking's originals are still read for their secrets.)
                self._warm_after_policy = False
                self._intake.warm_for_compaction(still_in_view=self._compactions != rewrites[0])
            self._limits.keep_media_within_limits_locked()
            if self._widening is not None:
                # (Most calls answer no output cut at write time: nothing to weigh then.)
                if self._widening.has_candidate(self._view):
                    self._widen_answered(rewrote=(self._compactions, self._masking.count) != rewrites)
                self._economics.previous_transient = self._widening.active
            # (Read before the count: the counter turns exact whenever the tokenizer is there and any thread asks, the
            # telemetry thread building a figure included; a count of bounds must never be recorded as exact.)
            provisional = self.counter.provisional
            tokens, _, count = self._view.totals()
            self._prepared_version = self._view.version
            span.set(tokens=self._grounded(tokens + self._tool_tokens), messages=count,
                     window=self.budgets.window, compactions=self._compactions, maskings=self._masking.count)
            if provisional:  # (a byte bound: the figure is counted exactly where the event is built)
                span.set_later(self._exact_figures().call_tokens)

    def _widen_answered(self, *, rewrote: bool) -> None:
        """Show the answered output cut at write time wider, when the cache economics allow it in this call."""
        assert self._widening is not None
        if not self._economics.may_widen(self._view, rewrote=rewrote):
            return
        limit = self._widening.limit(self.policy.answered_output_tokens, self.budgets.window)
        if self.policy.answered_output_tokens is None:
            limit = self._economics.widen_limit(limit, self._widening.cap(self.budgets.window))
        self._widening.widen(self._view, room=self._room_to_widen, limit=limit)

    def _room_to_widen(self) -> int:
        """Tokens the answered outputs may grow by in this call: up to the hard threshold, a budget line after it."""
        tokens, _, _ = self._view.totals()
        line = self.steering.status_reserve - self.steering.decision_reserve  # a line may follow the view
        return self.budgets.hard - self._grounded(tokens + self._tool_tokens) - line

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
        # Read before counting: a counter turned exact while the view was counted (the tokenizer's arrival, or the
        # telemetry thread building a figure) may have counted part of it in byte bounds.
        provisional = self.counter.provisional
        tokens, tool_tokens, count = self._view.totals()
        total = self._grounded(tokens + self._tool_tokens)
        plan = self.provider_context.gate(
            self._decisions.decide(total, count, tool_tokens, self.budgets, self._effective_policy()), total)
        if plan.action is not _compaction.Action.NONE and provisional:
            # Byte upper bounds said "act": only exact counts may decide how (the bounds can be 4x too high).
            self._count_exactly()
            return self._plan()
        return plan, tokens, total, tool_tokens, count

    def _count_exactly(self) -> None:
        """Wait for the exact tokenizer (a lazy counter counts byte upper bounds while it loads)."""
        if self.counter.provisional:
            self.counter.wait_exact()

    def _exact_figures(self) -> ExactFigures:
        """The view's figures as they stand, counted exactly when recorded (while counts are byte bounds)."""
        from ._exact_figures import ExactFigures

        return ExactFigures(self.counter, self._view.normalized(), self._extras.counted_later(),
                            self.steering.decision_line())

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

    def _never_masked(self) -> frozenset[str] | None:
        """The tools whose outputs automatic masking never takes; None when masking is not automatic."""
        p = self.policy
        if self.cache is None or not p.auto or not p.enabled:
            return None
        return frozenset((*p.exclude_tools, *p.protected_tools))

    def _effective_policy(self) -> Policy:
        """The policy in force: ``policy``, with ``auto`` off while the circuit breaker holds compaction paused.

        The paused copy is made once per policy (a policy is frozen; one set on the manager is a new object) and
        handed out again: a copy per call made each decision look new to the plan kept per figures (``Decisions``
        compares the policy by identity), so a paused session decided every call again.
        """
        policy = self.policy
        if not (policy.auto and self.paused):
            return policy
        paused = self._paused_policy
        if paused is None or paused[0] is not policy:
            paused = self._paused_policy = (policy, policy.model_copy(update={"auto": False}))
        return paused[1]

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
            if idle and self.background and self.counter.provisional:
                # Byte upper bounds said "compact while idle": only exact counts may start it.
                self._count_exactly()
                plan, _, total, _, _ = self._plan()
                idle = total >= self.policy.sleep_threshold(self.budgets.window)
            if self.background and (idle or plan.action in (Action.SOFT, Action.HARD, Action.EMERGENCY)):
                started = self.compact_in_background()
            # A check that starts nothing is only "not yet" (or "the next prepare() will"): counted, not sent.
            self.tracer.emit(TriggerDecision(session_id=self.session_id, triggered=plan.action is not Action.NONE,
                                             reason=f"{where}: {plan.reason}", action=str(plan.action),
                                             tokens=total, threshold_tokens=self._compaction.threshold(plan),
                                             policy=self._policy_summary), noop=started is None)
            return plan

    # -- compaction: computed by the compactor, applied here -------------------------------------------------------
    def compact(self, *, force: bool = True, instructions: str | None = None, kind: str = "hard") -> CompactionReport:
        """Compact now (a manual ``/compact``), whatever the thresholds; returns a report with the figures."""
        from ._build import CompactionReport

        with self._lock:
            before_tokens, _, before_count = self._view.totals()
            if not force and self.tokens() < self.budgets.soft:
                return CompactionReport.unchanged(before_tokens, before_count)
            return self._compaction.compact(kind, instructions=instructions, started=time.perf_counter())

    def _archive_transcript(self, view: list[Message]) -> int:
        number = self._archiver.transcript(view)
        self._archived_seq = self._seq  # every message added so far is now in an archived transcript
        return number

    def _archive_dropped(self, also: Sequence[Message] = ()) -> None:
        """Archive what normalization removed for good (a result whose call was compacted away, a duplicate).

        ``also``: the results of a batch being added that answer no call (if the archive fails, that add fails).
        Forgotten only once archived: a failing archive (or redactor) left them out of it for good (b52e09e).
        """
        self._archiver.dropped([*self._view.dropped, *also])
        self._view.dropped = []

    def _archive_dropped_or_report(self) -> None:
        """``_archive_dropped()`` for ``prepare()``: a failure is logged and reported, not raised.

        The model call must not wait on the archive: raising here failed every ``prepare()`` for as long as the
        archive was down (what is owed stays owed, so each turn tried again). The items stay in ``view.dropped``
        and the next ``prepare()`` (or ``archive_view()``, which raises) archives them once the archive is back.
        """
        try:
            self._archive_dropped()
        except Exception as error:
            owed = len(self._view.dropped)
            message = (f"archiving {owed} message(s) normalization dropped failed ({type(error).__name__}); "
                       "they stay owed to the archive and the next prepare() tries again")
            _log.exception(message)
            self.tracer.emit(CompactWarning(session_id=self.session_id, message=message, code="archive_failed"))

    # -- idle-time compaction -------------------------------------------------------------------------------------
    def compact_in_background(self) -> Future[CompactionResult] | None:
        """Start a soft compaction on a worker thread when the view is over the sleep threshold (50% of the window).

        The result is applied by the next ``prepare()`` only if the view has not been rewritten meanwhile (new
        messages appended at the end are fine: they are kept after the compacted part); otherwise it is dropped
        and the policy plans again. Returns the future, or None when there is nothing to do.
        """
        return self._compaction.compact_in_background()

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
                self._count_exactly()  # the grounding offset must be against exact counts
                tokens, _, count = self._view.totals()
                self._grounding = (self._view.version, count, prompt_tokens - tokens - self._tool_tokens)
            if self._widening is not None and self._widening.active:
                # The compaction decides on the history's own view (the provider's count above was of the wider
                # one: the grounding goes with the version it was taken on).
                self._widening.narrow(self._view)
            return self._compaction.compact("hard", instructions=None, started=time.perf_counter())

    # -- the provider's learned limit ------------------------------------------------------------------------------
    @property
    def learned_limit(self) -> int | None:
        """The most tokens (view and request extras, by our count) the provider was found to accept, or None."""
        return self._limits.learned_limit()

    def learn_limit(self, tokens: int, *, provider_limit: int | None = None, shared: int | None = None,
                    provisional: bool = False) -> bool:
        """The provider accepts at most ``tokens`` (our count of the view plus tool schemas): keep under it.

        Overflow recovery calls it with what each context-length error teaches. The thresholds become those of the
        learned limit (``budgets``), so later turns compact before they reach it and the answered output is never
        widened past it; the limit is kept in the blob store for the model, where other sessions, a restarted
        process or another worker find it. It only goes down; True when it did. ``shared``: the part of it that
        holds for every caller of the model, stored instead of ``tokens`` when given (what this session's own
        ``max_tokens`` took off stays with this manager); ``0`` when none of it does (an error naming no limit).
        ``provisional``: an inferred limit (an error naming none, or an implausibly small figure), kept by this
        session only and for ``PROVISIONAL_LIMIT_SECONDS`` (15 min), after which the provider is asked again.
        """
        return self._limits.learn_limit(tokens, provider_limit=provider_limit, shared=shared,
                                        provisional=provisional)

    @property
    def configured_budgets(self) -> Budgets:
        """The thresholds of the configured window, whatever limit the provider's errors taught (``budgets``)."""
        return self._limits.window_budgets

    @property
    def media_limits(self) -> MediaLimits:
        """The media limits in force: the provider's published ones, lowered by what its errors taught."""
        return self._limits.media_limits()

    def media(self) -> MediaTally:
        """The images and documents the view carries now (inline bytes as sent, and items)."""
        return self._limits.media()

    def learn_media_limit(self, *, max_bytes: int | None = None, max_items: int | None = None,
                          shared: bool = True) -> bool:
        """Keep each request under ``max_bytes`` (media and text) and ``max_items`` images and documents, our count.

        The limits apply from the next ``prepare()`` on; True when one went down. Overflow recovery calls it with
        what a media error teaches (``413 request_too_large``, ``Too much media``). Limits only go down. From then
        on, whenever the view is over one, the oldest images and documents are replaced with a short text naming
        them (the originals stay in the archive), down to :data:`~contextfold.media.LOW_WATER` of it, so that the
        cached prefix is not rewritten on every turn. ``shared=False``: kept by this manager only, not in the store
        for the model's other managers (a refusal naming no limit may be of this request alone).
        """
        return self._limits.learn_media_limit(max_bytes=max_bytes, max_items=max_items, shared=shared)

    def keep_media_within_limits(self) -> int:
        """Take the oldest images and documents out until the view is within the media limits; how many went.

        ``prepare()`` does it on every call; overflow recovery calls it after learning a limit.
        """
        return self._limits.keep_media_within_limits()

    def forget_learned_limit(self) -> None:
        """Forget the learned limit (here and in the store): the thresholds go back to the configured window."""
        self._limits.forget_learned_limit()

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

        Raises:
            InvalidHistory: what the rewrite returned holds what ``add()`` refuses; the view is left as it was.
        """
        from ..pairing import check_messages
        from ..telemetry import MessagesPruned

        with self._lock:
            view = self._view.normalized()
            # Checked before anything changes: a dict or a malformed message put in the view failed every later call
            # (red team 17), and the old view was archived and gone.
            new = check_messages(rewrite(list(view)))
            if new == view:
                return 0
            self._archive_transcript(view)
            kept = {id(m) for m in new}
            removed = [m for m in view if id(m) not in kept]
            self._view.replace(new, checked=True)
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

        parsed = TokenUsage.from_any(usage)
        with foreground, self._lock:
            self._economics.note_usage(usage)  # (the cache the call wrote prices the next rewrites)
            self._count_exactly()  # the grounding offset must be against exact counts
            self.usage_total = self.usage_total + parsed
            tokens, _, count = self._view.totals()
            counted = tokens + self._tool_tokens + self._status_uncounted
            if parsed.prompt_tokens > _IMPLAUSIBLE_PROMPT_FACTOR * self._limits.window_budgets.window:
                self.tracer.emit(CompactWarning(
                    session_id=self.session_id, code="usage_implausible",
                    message=f"the provider reported a prompt of {parsed.prompt_tokens:,} tokens, over "
                            f"{_IMPLAUSIBLE_PROMPT_FACTOR}x the window of {self._limits.window_budgets.window:,}: "
                            "no request it accepted; token counts stay contextfold's own"))
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

        Raises:
            InvalidHistory: a message ``add()`` would refuse (an unknown role, arguments that are not a JSON object,
                a call id that is not a string, ...), naming its index and field; nothing is adopted.
        """
        from ..pairing import check_messages
        from ..provider_context import mark

        with self._lock:
            if len(self._view):
                raise ValueError("adopt: the manager already holds messages; adopt on a fresh manager")
            # Checked as add() checks, before anything changes: unchecked, a bad role was dropped from the view
            # without a word and invalid arguments went to the provider (red team 19). (mark and the foreign ref's
            # removal change meta only: what passed stays valid, so planning does not check the view again.)
            stored = [self._intake.without_foreign_ref(mark(m)) for m in check_messages(messages)]
            self._view.replace(stored, checked=True)  # (not append: "aborted" placeholders known, for late results)
            self._provider_items.note(stored)
            versions = [int(m.meta.get("summary_version", 0)) for m in stored if m.kind == "summary"]
            self._compactions = max(versions, default=0)  # the next summary continues the numbering
            self._secrets.adopted(stored)  # (a key phrase ending the stored view waits for the value added next)

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
            self._compaction.apply_idle_result()
            self.check("before finish")
        self._idle.shutdown()
        with self._lock:
            self._compaction.apply_idle_result()
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
