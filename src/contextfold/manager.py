"""The ContextManager: one per agent session, the one stateful object.

It owns the view (what the model sees), the tool output cache, the archive and the telemetry, and runs the flow of
a turn (DESIGN.md): ``add`` truncates big tool outputs at write time and counts only the new messages; ``prepare``
normalizes, decides, masks / summarizes / compacts when the policy says so, archives what leaves the view, and
returns the view in the caller's wire format; ``record_usage`` grounds the next decision in the provider's counts.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .archive import PARTS_META, parts_skeleton
from .compact import CompactionResult, compact, plan_compaction
from .errors import ContextfoldError, InsufficientBudget, RecoveryFailed
from .events import (
    CacheMasked,
    CacheTruncated,
    CompactError,
    CompactWarning,
    MessagesPruned,
    SummaryCreated,
    TokenEstimate,
    TriggerDecision,
    UsageRecorded,
)
from .formats import get_format
from .manager_async import AsyncMirror
from .manager_parts import CompactionReport, Components, Status, build_components, coerce_messages
from .messages import Message
from .policy import Action, Plan, Policy, decide
from .usage import TokenUsage
from .view import View

__all__ = ["CompactionReport", "ContextManager", "Status"]

# Masking to get under the soft threshold aims at 80% of it, so that the next turns do not mask again at once.
MASK_HEADROOM = 0.8
# An automatic soft compaction must save clear_at_least tokens, or a tenth of the view in small windows.
MIN_SAVING_DIVISOR = 10
# 48 random bits per manager: collisions between the managers of one session are out of reach.
_ID_NONCE_HEX = 12
# A soft compaction computed in the background is worth keeping only while the view it was computed from is intact.
_IDLE_WORKERS = 1


class ContextManager(AsyncMirror):
    """Keeps one agent session inside its model's context window.

    >>> cm = ContextManager(model="gpt-4o", store="memory", archive="memory")
    >>> cm.add([{"role": "user", "content": "hello"}])
    >>> cm.prepare(format="openai_chat")
    [{'role': 'user', 'content': 'hello'}]

    Args:
        model: The model the agent calls; its window and tokenizer come from the registry.
        max_context_tokens: The window to work within (required for models the registry does not know).
        policy: A :class:`~contextfold.policy.Policy` or a mapping of its fields.
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
    ) -> None:
        parts: Components = build_components(
            model=model, max_context_tokens=max_context_tokens, policy=policy, summarizer=summarizer, store=store,
            archive=archive, telemetry=telemetry, session_id=session_id, redact=redact, clock=clock,
        )
        self.model = parts.model
        self.policy = parts.policy
        self.budgets = parts.budgets
        self.counter = parts.counter
        self.cache = parts.cache
        self.summarizer = parts.summarizer
        self.archive = parts.archive
        self.tracer = parts.tracer
        self.session_id = parts.session_id
        self.redactor = parts.redactor
        self._clock = parts.clock
        self.background = background
        self.tools: list[Mapping[str, Any]] = list(tools)
        self._tool_tokens = self.counter.count_tools(self.tools) if self.tools else 0
        self._view = View(self.counter)
        self._lock = threading.RLock()
        self._seq = 0
        # Ids must not repeat across managers of one session (a restarted process, another worker): the archive
        # merges transcripts by id, so a second "s1:1" would hide the first. A per-manager nonce keeps them apart.
        # Pass message_id_prefix for reproducible ids (a replay), when one process owns the session for good.
        self._id_prefix = message_id_prefix or f"{self.session_id}:{uuid.uuid4().hex[:_ID_NONCE_HEX]}"
        self._compactions = 0
        self._maskings = 0
        self._archived = 0
        self._failed_compactions = 0
        self.paused = False  # circuit breaker: automatic compaction stops after repeated failures
        self._grounding: tuple[int, int, int] | None = None  # (view version, messages sent, reported - counted)
        self._idle: tuple[int, int, Future[CompactionResult]] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.last_plan: Plan | None = None
        self._floor: int | None = None  # tokens of the view right after the last compaction
        self.usage_total = TokenUsage()
        self._policy_summary = {"trigger_pct": self.policy.trigger_pct, "soft_pct": self.policy.soft_pct,
                                "hard": self.budgets.hard, "soft": self.budgets.soft, "auto": self.policy.auto}
        for warning in parts.warnings:
            self.tracer.emit(CompactWarning(session_id=self.session_id, message=warning, code="config"))

    @classmethod
    def from_config(cls, path: str | None = None, *, env: Mapping[str, str] | None = None,
                    **kwargs: Any) -> ContextManager:
        """Build a manager from a YAML file, then environment overrides, then ``kwargs`` (which win).

        Settings keys (``model``, ``max_context_tokens``, ``policy``, ``telemetry``, ``storage``, ``redaction``)
        go through :func:`contextfold.config.load_settings`; other keywords (``summarizer``, ``session_id``,
        ``tools``, …) go to the constructor.
        """
        from .config import load_settings
        from .manager_parts import settings_arguments

        setting_keys = {"model", "max_context_tokens", "policy", "telemetry", "storage", "redaction"}
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
        with self._lock:
            incoming = coerce_messages(messages, format=format, start=len(self._view))
            stored: list[Message] = []
            for m in incoming:
                self._seq += 1
                m = m.with_meta(id=m.meta.get("id") or f"{self._id_prefix}:{self._seq}")
                if m.role == "tool" and self.cache is not None and not m.protected:  # protected: byte for byte
                    processed = self.cache.process(m)
                    if processed is not m and processed.meta.get("ref"):
                        self.tracer.emit(CacheTruncated(session_id=self.session_id, ref=str(processed.meta["ref"]),
                                                        bytes=len(m.text.encode()),
                                                        kept_bytes=len(processed.text.encode()),
                                                        tool_name=m.name))
                    m = _with_layout(m, processed)
                stored.append(m)
            stored, orphans = self._view.split_orphans(stored)
            if orphans:
                self._view.dropped.extend(orphans)
                self._archive_dropped()
            self._view.append(stored)
            if any(m.role == "tool" for m in stored):
                self.check("after tool execution")

    # -- preparing ------------------------------------------------------------------------------------------------
    def prepare(self, format: str = "openai_chat") -> Any:
        """The view to send, in ``format``.

        A list of messages/items for OpenAI Chat and Responses; the request fragment for Anthropic
        (``{"system", "messages"}``) and Gemini (``{"system_instruction", "contents"}``). Compacts first when
        the policy says so; raises InsufficientBudget when even full compaction cannot fit.
        """
        wire = get_format(format)
        with self._lock:
            self._apply_idle_result()
            self._run_policy()
            if self._redacts_model_input():
                # Configured (Redactor(apply_to_model=True)): the model sees the redacted view, encoded afresh.
                view = self.redactor.redact_messages(self._view.normalized())
                return wire.encode(view) if format in ("openai_chat", "openai_responses") else wire.encode_request(view)
            if format in ("openai_chat", "openai_responses"):
                return self._view.encoded(wire)
            return wire.encode_request(self._view.normalized())

    def prepare_messages(self) -> list[Message]:
        """The view as Message objects (for framework adapters), compacting first when the policy says so."""
        with self._lock:
            self._apply_idle_result()
            self._run_policy()
            view = self._view.normalized()
            return self.redactor.redact_messages(view) if self._redacts_model_input() else view

    def _redacts_model_input(self) -> bool:
        return self.redactor is not None and bool(getattr(self.redactor, "apply_to_model", False))

    def tokens(self) -> int:
        """Tokens of the view as it would be sent now (tool schemas included), grounded in reported usage."""
        with self._lock:
            tokens, _, _ = self._view.totals()
            return self._grounded(tokens + self._tool_tokens)

    def _grounded(self, counted: int) -> int:
        g = self._grounding
        if g is not None and g[0] == self._view.version and len(self._view) >= g[1]:
            return max(0, counted + g[2])
        return counted

    def _run_policy(self) -> None:
        started = time.perf_counter()
        tokens, tool_tokens, count = self._view.totals()
        total = self._grounded(tokens + self._tool_tokens)
        plan = decide(total, count, tool_tokens, self.budgets, self._effective_policy())
        self.last_plan = plan
        self.tracer.emit(TokenEstimate(session_id=self.session_id, messages=tokens, tools_schema=self._tool_tokens,
                                       system=0, developer=0, model=self.model.name,
                                       context_window=self.budgets.window))
        if plan.action is Action.NONE:
            return
        self.tracer.emit(TriggerDecision(session_id=self.session_id, triggered=True, action=str(plan.action),
                                         reason=plan.reason, tokens=total, threshold_tokens=self.budgets.soft,
                                         policy=self._policy_summary))
        if self.cache is not None and plan.action is not Action.EMERGENCY:
            # Masking loses nothing (every output stays readable by ref), so it goes first: down to the tool-output
            # budget, and when the view is over soft, far enough to get it back under soft with some headroom.
            budget = self.budgets.tool_output_budget
            if plan.action is not Action.MASK:
                wanted = total - int(self.budgets.soft * MASK_HEADROOM)
                budget = min(budget, max(0, tool_tokens - wanted))
            self._mask(budget)
            tokens, tool_tokens, count = self._view.totals()
            total = self._grounded(tokens + self._tool_tokens)
        if plan.action is not Action.EMERGENCY:
            # Masking has done what it could (protected, excluded and recent outputs stay; there may be no cache):
            # decide again with nothing left to mask, or a MASK plan would leave the view over its threshold.
            plan = decide(total, count, 0, self.budgets, self._effective_policy())
            self.last_plan = plan
            if plan.action is Action.NONE:
                return
        if plan.action is Action.SOFT and self._floor is not None and total - self._floor < self.policy.clear_at_least:
            # The view grew too little since the last compaction for another summary to pay off; hard still fires.
            return
        self._compact(str(plan.action), instructions=None, started=started, automatic=True)

    def _effective_policy(self) -> Policy:
        if self.paused and self.policy.auto:
            return self.policy.model_copy(update={"auto": False})
        return self.policy

    def _mask(self, budget_tokens: int) -> None:
        if self.cache is None:
            return
        view = self._view.normalized()
        p = self.policy
        result = self.cache.mask(
            view, counter=self.counter, budget_tokens=budget_tokens,
            keep_tool_io_pairs=p.keep_tool_io_pairs, exclude_tools=(*p.exclude_tools, *p.protected_tools),
            clear_at_least=p.clear_at_least, clear_tool_inputs=p.clear_tool_inputs,
        )
        if not result.masked_indices:
            return
        masked = list(result.messages)
        for i in result.masked_indices:
            masked[i] = _with_layout(view[i], masked[i])
        self._view.replace(masked)
        self._maskings += 1
        self.tracer.emit(CacheMasked(session_id=self.session_id, count=len(result.masked_indices),
                                     refs=tuple(str(result.messages[i].meta.get("ref", ""))
                                                for i in result.masked_indices),
                                     tokens_freed=result.tokens_freed,
                                     prefix_tokens_invalidated=result.prefix_tokens_invalidated))

    def check(self, where: str = "check") -> Plan:
        """Decide without acting: the event says what the policy would do.

        With ``background`` on and the view over the soft threshold, soft compaction starts on a worker thread.
        """
        with self._lock:
            tokens, tool_tokens, count = self._view.totals()
            total = self._grounded(tokens + self._tool_tokens)
            plan = decide(total, count, tool_tokens, self.budgets, self._effective_policy())
            self.tracer.emit(TriggerDecision(session_id=self.session_id, triggered=plan.action is not Action.NONE,
                                             reason=f"{where}: {plan.reason}", action=str(plan.action),
                                             tokens=total, threshold_tokens=self.budgets.soft,
                                             policy=self._policy_summary))
            if self.background and plan.action in (Action.SOFT, Action.HARD, Action.EMERGENCY):
                self.compact_in_background()
            return plan

    # -- compaction -----------------------------------------------------------------------------------------------
    def compact(self, *, force: bool = True, instructions: str | None = None, kind: str = "hard") -> CompactionReport:
        """Compact now (a manual ``/compact``), whatever the thresholds; returns a report with the figures."""
        with self._lock:
            before_tokens, _, before_count = self._view.totals()
            if not force and self.tokens() < self.budgets.soft:
                return CompactionReport(before_tokens, before_tokens, before_count, before_count, 0, 0.0, None)
            return self._compact(kind, instructions=instructions, started=time.perf_counter())

    def _compact(self, kind: str, *, instructions: str | None, started: float,
                 automatic: bool = False) -> CompactionReport:
        view = self._view.normalized()
        try:
            result = compact(view, policy=self.policy, counter=self.counter, summarizer=self.summarizer,
                             budget=self._target(view, kind), kind=kind,
                             compaction_count=self._compactions, instructions=instructions, clock=self._clock)
        except InsufficientBudget:
            self._failed_compactions += 1
            raise
        except ContextfoldError as exc:
            self._compaction_failed(exc)
            raise
        self._failed_compactions = 0
        if automatic and kind == "soft" and not self._worth_applying(result):
            # Summarizing what masking already shrank saved too little to be worth a prompt-cache miss: keep the
            # view, and wait until it has grown (or hard compaction is due).
            self._floor = result.stats.tokens_before + self._tool_tokens
            stats = result.stats
            return CompactionReport(stats.tokens_before, stats.tokens_before, stats.messages_before,
                                    stats.messages_before, 0, (time.perf_counter() - started) * 1000, None)
        return self._apply(view, result, started)

    def _worth_applying(self, result: CompactionResult) -> bool:
        """Whether an automatic soft compaction saved enough to pay for the prompt-cache miss it causes."""
        before = result.stats.tokens_before
        needed = min(self.policy.clear_at_least, before // MIN_SAVING_DIVISOR)
        return result.stats.tokens_after <= before - needed

    def _target(self, view: list[Message], kind: str) -> int:
        """Tokens a compaction aims for: halfway between soft and hard when that loses nothing more.

        Landing just under hard would compact again on the next turn (thrash, and a prompt-cache miss each time);
        but a lower target must not cost keep counts or user messages, so a dry run decides.
        """
        hard = self.budgets.hard - self._tool_tokens
        if kind == "soft":
            return hard
        target = (self.budgets.soft + self.budgets.hard) // 2 - self._tool_tokens
        try:
            plan = plan_compaction(view, policy=self.policy, counter=self.counter, budget=target, kind=kind)
        except ContextfoldError:
            return hard
        return hard if plan.warnings else target

    def _apply(self, view: list[Message], result: CompactionResult, started: float) -> CompactionReport:
        number = self._archive_transcript(view)
        self._view.replace(result.messages)
        self._compactions += 1
        self._floor = result.stats.tokens_after + self._tool_tokens
        stats = result.stats
        if result.summary is not None:
            payload = {"summary": result.summary.summary, "retain": list(result.summary.retain),
                       "summarizer": result.summary.summarizer, "stats": stats.to_dict()}
            if self.archive is not None:
                self.archive.archive_summary(self.session_id, number, self._redacted(payload))
            self.tracer.emit(SummaryCreated(
                session_id=self.session_id, strategy=self.policy.strategy, input_messages=stats.compacted_count,
                input_tokens=stats.tokens_before, summary_tokens=stats.summary_tokens,
                summary=self._redact_text(result.summary.summary), model=result.summary.summarizer,
                summary_version=stats.summary_version))
        self.tracer.emit(MessagesPruned(session_id=self.session_id, count=len(result.removed),
                                        ids=tuple(str(m.meta.get("id", "")) for m in result.removed),
                                        kept=dict(stats.kept)))
        for warning in result.warnings:
            self.tracer.emit(CompactWarning(session_id=self.session_id, message=warning, code="compaction"))
        duration = (time.perf_counter() - started) * 1000
        return CompactionReport(stats.tokens_before, stats.tokens_after, stats.messages_before, stats.messages_after,
                                stats.compacted_count, duration, result.summary)

    def _compaction_failed(self, exc: Exception) -> None:
        self._failed_compactions += 1
        self.tracer.emit(CompactError(session_id=self.session_id, error_type=type(exc).__name__,
                                      message=str(exc), fallback="none"))
        if self._failed_compactions >= 3 and not self.paused:
            self.paused = True

    def _archive_transcript(self, view: list[Message]) -> int:
        self._archived += 1
        if self.archive is None:
            return self._archived
        messages = [self.redactor.redact_message(m) for m in view] if self.redactor is not None else view
        return int(self.archive.archive_transcript(self.session_id, messages))

    def _archive_dropped(self) -> None:
        """Archive what normalization removed for good (a result whose call was compacted away, a duplicate)."""
        dropped = self._view.dropped
        if not dropped:
            return
        self._view.dropped = []
        if self.archive is not None:
            self.archive.archive_transcript(self.session_id, dropped)
        self.tracer.emit(MessagesPruned(session_id=self.session_id, count=len(dropped),
                                        ids=tuple(str(m.meta.get("id", "")) for m in dropped),
                                        kept={"normalization_dropped": len(dropped)}))

    def _redacted(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self.redactor is None:
            return payload
        redacted: dict[str, Any] = self.redactor.redact_obj(payload)
        return redacted

    def _redact_text(self, text: str) -> str:
        return self.redactor.redact_text(text) if self.redactor is not None else text

    # -- idle-time compaction -------------------------------------------------------------------------------------
    def compact_in_background(self) -> Future[CompactionResult] | None:
        """Start a soft compaction on a worker thread when the view is over the soft threshold.

        The result is applied by the next ``prepare()`` only if the view has not been rewritten meanwhile (new
        messages appended at the end are fine: they are kept after the compacted part); otherwise it is dropped
        and the policy plans again. Returns the future, or None when there is nothing to do.
        """
        with self._lock:
            if self._idle is not None or not self.policy.auto or self.paused or self.tokens() < self.budgets.soft:
                return None
            snapshot = self._view.normalized()
            version = self._view.version
            if self._executor is None:
                self._executor = ThreadPoolExecutor(_IDLE_WORKERS, thread_name_prefix="contextfold-idle")
            future = self._executor.submit(
                compact, snapshot, policy=self.policy, counter=self.counter, summarizer=self.summarizer,
                budget=self.budgets.hard - self._tool_tokens, kind="soft", compaction_count=self._compactions,
                clock=self._clock)
            self._idle = (version, len(snapshot), future)
            self._idle_snapshot = snapshot
            return future

    def _apply_idle_result(self) -> None:
        pending = self._idle
        if pending is None or not pending[2].done():
            return
        self._idle = None
        version, length, future = pending
        snapshot = self._idle_snapshot
        current = self._view.normalized()
        intact = version == self._view.version and len(current) >= length and all(
            a is b for a, b in zip(current[:length], snapshot, strict=True))
        try:
            result = future.result()
        except ContextfoldError as exc:
            self._compaction_failed(exc)
            return
        if not intact:
            self.tracer.emit(CompactWarning(session_id=self.session_id, code="idle_discarded",
                                            message="background compaction dropped: the view changed meanwhile"))
            return
        if not self._worth_applying(result):
            self._floor = result.stats.tokens_before + self._tool_tokens  # too little saved: see _compact
            return
        tail = current[length:]
        self._apply(snapshot, _with_tail(result, tail), time.perf_counter())

    # -- usage ----------------------------------------------------------------------------------------------------
    def record_usage(self, usage: Any) -> TokenUsage:
        """Record what the provider reported for the call made with the last prepared view."""
        parsed = TokenUsage.from_any(usage)
        with self._lock:
            self.usage_total = self.usage_total + parsed
            tokens, _, count = self._view.totals()
            counted = tokens + self._tool_tokens
            if parsed.prompt_tokens > 0:
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
                          maskings=self._maskings, paused=self.paused)

    @property
    def compactions(self) -> int:
        """Compactions applied in this session."""
        return self._compactions

    @property
    def maskings(self) -> int:
        """Masking passes applied in this session."""
        return self._maskings

    def messages(self) -> list[Message]:
        """The stored view as Message objects, without compacting (a snapshot)."""
        with self._lock:
            return self._view.normalized()

    def finish(self) -> None:
        """The agent is done: run the final check, wait for background work, flush telemetry."""
        with self._lock:
            self._apply_idle_result()
            self.check("before finish")
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        with self._lock:
            self._apply_idle_result()
        sink = self.tracer.telemetry
        flush = getattr(sink, "flush", None)
        if callable(flush):
            flush()

    def close(self) -> None:
        """Release the stores and worker threads."""
        self.finish()
        stop = getattr(self.tracer.telemetry, "shutdown", None)
        if callable(stop):
            stop()
        close = getattr(self.cache, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> ContextManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- overflow recovery ----------------------------------------------------------------------------------------
    def shrink_for_overflow(self, prompt_tokens: int | None = None, limit: int | None = None) -> CompactionReport:
        """Make the view smaller after the provider said it is too long (see :mod:`contextfold.recovery`).

        Uses the counts from the error, when given, to correct the estimate first.
        """
        with self._lock:
            if not self.policy.auto and not self.policy.allow_on_overflow:
                raise RecoveryFailed("the provider reported a context overflow, but automatic compaction is off "
                                     "(Policy(auto=False)); set allow_on_overflow=True to let recovery compact")
            if self.paused:
                raise RecoveryFailed(f"automatic compaction is paused after {self._failed_compactions} failed "
                                     "compactions in a row (circuit breaker)")
            if prompt_tokens is not None:
                tokens, _, count = self._view.totals()
                self._grounding = (self._view.version, count, prompt_tokens - tokens - self._tool_tokens)
            return self._compact("hard", instructions=None, started=time.perf_counter())

    @property
    def failed_compactions(self) -> int:
        """Compactions that failed in a row (a success resets it); overflow recovery's circuit breaker reads it."""
        return self._failed_compactions

    def rewrite_view(self, rewrite: Callable[[list[Message]], list[Message]], *, reason: str) -> int:
        """Replace the view with ``rewrite(view)`` atomically, archiving the old view first (nothing is lost).

        Overflow recovery uses it to drop the oldest messages when compaction cannot help. Returns how many
        messages left the view.
        """
        with self._lock:
            view = self._view.normalized()
            new = rewrite(list(view))
            if new == view:
                return 0
            self._archive_transcript(view)
            kept = {id(m) for m in new}
            removed = [m for m in view if id(m) not in kept]
            self._view.replace(new)
            self.tracer.emit(MessagesPruned(session_id=self.session_id, count=len(removed),
                                            ids=tuple(str(m.meta.get("id", "")) for m in removed),
                                            kept={reason: len(new)}))
            return len(removed)

def _with_tail(result: CompactionResult, tail: Sequence[Message]) -> CompactionResult:
    from dataclasses import replace

    return replace(result, messages=[*result.messages, *tail])


def _with_layout(original: Message, view: Message) -> Message:
    """``view`` remembering the part layout of ``original`` when it flattened a multi-part text into one string.

    The cache keeps only the joined text; the layout lets the archive's restore give back the parts themselves.
    """
    if view is original or isinstance(original.content, str) or PARTS_META in view.meta:
        return view
    skeleton = parts_skeleton(original)
    return view if skeleton is None else view.with_meta(**{PARTS_META: skeleton})
