"""Compaction, idle-time compaction and overflow shrinking: the ContextManager's expensive half.

A mixin of :class:`~contextfold.manager.ContextManager`: it works on the manager's state under the manager's lock
(every public method here takes it), and keeps the runtime module about the flow of a turn.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._spans import ARCHIVE_KIND, COMPACT_KIND

# Compaction modules are imported by the first compaction, not with the manager (issue 15: cold start).
if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..cache import ToolOutputCache
    from ..compaction import Budgets, CompactionPlan, CompactionResult, Policy
    from ..messages import Message
    from ..summarize import Summarizer
    from ..telemetry import Tracer
    from ..tokens import MessageCounter
    from ._build import CompactionReport
    from ._view import View

__all__ = ["CompactionMixin", "warm_for_compaction"]

# An automatic soft compaction must save clear_at_least tokens, or a tenth of the view in small windows.
MIN_SAVING_DIVISOR = 10
# A soft compaction computed in the background is worth keeping only while the view it was computed from is intact.
_IDLE_WORKERS = 1
# A compaction that left the view over a trigger runs again only once the view has grown by this share of the
# message cap (or by clear_at_least tokens): compacting the same view again would give the same result, every turn.
STALL_REGROWTH_SHARE = 0.1
# Redacted messages remembered for the next transcript: more than any view holds, so only what left goes.
_REDACT_MEMO_SIZE = 50_000
# The answered results may take up to this fraction (1/N) of a compaction's budget before they are cut harder:
# the rest is for the pinned prompt, the user's requests and the summary.
ANSWERED_BUDGET_DIVISOR = 2
# Below this many tokens per answered result a re-cut view would be little more than its reading note (the view
# keeps about 200 tokens for notes): the results are then left to the compaction's last resort.
MIN_ANSWERED_SHARE_TOKENS = 320
# After this many compactions failing in a row, automatic compaction pauses (circuit breaker).
CIRCUIT_BREAKER_FAILURES = 3


def warm_for_compaction(messages: Sequence[Message], counter: Any, redactor: Any, archived: bool) -> None:
    """Read ``messages`` as a compaction will, on a background thread: a compaction then finds the work done.

    - ``counter``: the extractive summarizer's token counter, or None (another summarizer): digest each message as
      the summarizer does (entities are cached by text) and count the entities' tokens (short counts are cached);
    - ``redactor``: scan what the archived transcript will redact (findings are cached by text, nothing learned);
    - ``archived``: serialize the messages the transcript will hold unchanged (lines are cached by message).

    Paced: the agent's thread never waits long for the GIL.
    """
    from ..serialize import message_line
    from ..summarize.digest import digest_messages
    from ..telemetry._pace import GilPacer

    pacer = GilPacer()
    if counter is not None:
        for m in messages:
            for value in digest_messages([m]).entities:
                counter.count(value)
            pacer.tick()
    if redactor is not None:
        redactor.warm(messages)
    if archived:
        for m in messages:
            if redactor is None or redactor.is_clean(m):  # (a redacted message is a new one, serialized then)
                message_line(m)
            pacer.tick()


class CompactionMixin:
    """Compaction for the ContextManager; the attributes below are the manager's."""

    policy: Policy
    budgets: Budgets
    counter: MessageCounter
    summarizer: Summarizer
    archive: Any
    cache: ToolOutputCache | None
    redactor: Any
    tracer: Tracer
    session_id: str
    paused: bool
    before_compaction: Callable[[list[Message], Any], None] | None
    _view: View
    _lock: threading.RLock
    _clock: Callable[[], datetime] | None
    _tool_tokens: int
    _compactions: int
    _archived: int
    _archived_seq: int
    _seq: int
    _failed_compactions: int
    _floor: int | None
    _stalled: tuple[int, int, int] | None
    _grounding: tuple[int, int, int] | None
    _idle: tuple[int, int, Future[CompactionResult]] | None
    _idle_snapshot: list[Message]
    _redact_memo: dict[int, tuple[Message, Message]]  # id(message) -> (message, redacted), for the next transcript
    _redact_memo_learned: object  # the redactor's learned-secrets table the memo was made with
    _executor: Any  # a concurrent.futures.ThreadPoolExecutor once started

    def tokens(self) -> int:
        """Tokens of the view; the manager's own method wins (this one only declares it for the type checker)."""
        raise NotImplementedError

    def _count_exactly(self) -> None:
        """Declared for the type checker; the manager's own method wins."""
        raise NotImplementedError

    # -- compaction -----------------------------------------------------------------------------------------------
    def compact(self, *, force: bool = True, instructions: str | None = None, kind: str = "hard") -> CompactionReport:
        """Compact now (a manual ``/compact``), whatever the thresholds; returns a report with the figures."""
        from ._build import CompactionReport

        with self._lock:
            before_tokens, _, before_count = self._view.totals()
            if not force and self.tokens() < self.budgets.soft:
                return CompactionReport.unchanged(before_tokens, before_count)
            return self._compact(kind, instructions=instructions, started=time.perf_counter())

    def _compact(self, kind: str, *, instructions: str | None, started: float,
                 automatic: bool = False) -> CompactionReport:
        with self.tracer.span(f"compact.{kind}", kind=COMPACT_KIND, automatic=automatic) as span:
            report = self._compact_in_span(kind, instructions=instructions, started=started, automatic=automatic)
            span.set(applied=report.compacted > 0, tokens_before=report.tokens_before,
                     tokens_after=report.tokens_after, messages_before=report.messages_before,
                     messages_after=report.messages_after, compacted=report.compacted)
        if report.compacted:
            self.tracer.wake()  # the compaction's events go out now, not after the batch delay
        return report

    def _compact_in_span(self, kind: str, *, instructions: str | None, started: float,
                         automatic: bool) -> CompactionReport:
        from ..compaction import compact
        from ..errors import ContextfoldError
        from ..telemetry import CompactWarning
        from ._build import CompactionReport
        from ._spans import TracedSummarizer

        self._count_exactly()
        view = self._view.normalized()
        budget, plan = self._target(view, kind)
        shrunk = self._shrink_answered(view, budget)
        if shrunk is not view:
            # Every full output is in the tool output cache under its ref: the harder cut loses nothing.
            recut = sum(1 for old, new in zip(view, shrunk, strict=True) if old is not new)
            self._view.replace(shrunk)
            self.tracer.emit(CompactWarning(
                session_id=self.session_id, code="answered_recut",
                message=f"the {recut} tool results being answered took over half of the compaction budget "
                        f"({budget:,} tokens): each was cut to a shorter view, readable in full by its ref"))
            view = self._view.normalized()
            budget, plan = self._target(view, kind)  # the dry run was of the view before the re-cut
        try:
            result = compact(view, policy=self.policy, counter=self.counter,
                             summarizer=TracedSummarizer(self.summarizer, self.tracer),
                             budget=budget, kind=kind, compaction_count=self._compactions,
                             instructions=instructions, clock=self._clock, plan=plan)
        except ContextfoldError as exc:  # InsufficientBudget included: it counts towards the circuit breaker
            self._compaction_failed(exc)
            raise
        self._failed_compactions = 0
        # Nothing compactable, or (automatic soft) summarizing what masking already shrank would save too little
        # to be worth a prompt-cache miss: keep the view, and wait until it has grown (or hard compaction is due).
        declined = automatic and kind == "soft" and not self._worth_applying(result)
        if not result.changed or declined:
            if declined:
                self._floor = result.stats.tokens_before + self._tool_tokens
            stats = result.stats
            return CompactionReport.unchanged(stats.tokens_before, stats.messages_before,
                                              (time.perf_counter() - started) * 1000)
        return self._apply(view, result, started)

    def _shrink_answered(self, view: list[Message], budget: int) -> list[Message]:
        """``view`` with the answered results cut harder when together they take over half of ``budget``.

        Compaction keeps the answered unit whole unless nothing else fits; a unit bigger than the budget (26 search
        results the model is about to read) would then leave the view altogether, replaced by a summary of a few
        dozen tokens. Cutting each result to an equal share keeps real content of every one, each readable in full
        by its ref. Without a tool output cache, or when the shares would be stubs, the view stays as it is.
        """
        from ..answered import answered_indices
        from ..archive import with_layout

        if self.cache is None:
            return view
        results = [i for i in answered_indices(view) if view[i].role == "tool" and not view[i].protected]
        if not results:
            return view
        allowance = budget // ANSWERED_BUDGET_DIVISOR
        if sum(self.counter.count_message(view[i]) for i in results) <= allowance:
            return view
        share = allowance // len(results)
        if share < MIN_ANSWERED_SHARE_TOKENS:
            return view
        shrunk = list(view)
        for i in results:
            if self.counter.count_message(view[i]) > share:
                shrunk[i] = with_layout(view[i], self.cache.shrink(view[i], share))
        return shrunk

    def _worth_applying(self, result: CompactionResult) -> bool:
        """Whether an automatic soft compaction saved enough to pay for the prompt-cache miss it causes."""
        before = result.stats.tokens_before
        needed = min(self.policy.clear_at_least, before // MIN_SAVING_DIVISOR)
        return result.stats.tokens_after <= before - needed

    def _target(self, view: list[Message], kind: str) -> tuple[int, CompactionPlan | None]:
        """Tokens a compaction aims for: halfway between soft and hard when that loses nothing more.

        Landing just under hard would compact again on the next turn (thrash, and a prompt-cache miss each time);
        but a lower target must not cost keep counts or user messages, so a dry run decides. Returns the budget,
        and the dry run when its budget is the one chosen (the compaction then does not plan again).
        """
        from ..compaction import plan_compaction
        from ..errors import ContextfoldError

        hard = self.budgets.hard - self._tool_tokens
        if kind == "soft":
            return hard, None
        target = (self.budgets.soft + self.budgets.hard) // 2 - self._tool_tokens
        try:
            plan = plan_compaction(view, policy=self.policy, counter=self.counter, budget=target, kind=kind)
        except ContextfoldError:
            return hard, None
        return (hard, None) if plan.warnings else (target, plan)

    def _apply(self, view: list[Message], result: CompactionResult, started: float) -> CompactionReport:
        from ..telemetry import CompactWarning, MessagesPruned, SummaryCreated
        from ._build import CompactionReport

        self._run_before_compaction(result)
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
                                        kept={**stats.kept, "recent_turns": stats.keep_turns,
                                              "tool_pairs": stats.keep_pairs},
                                        protected=_protected_names(result.messages)))
        for warning in result.warnings:
            self.tracer.emit(CompactWarning(session_id=self.session_id, message=warning, code="compaction"))
        duration = (time.perf_counter() - started) * 1000
        return CompactionReport(stats.tokens_before, stats.tokens_after, stats.messages_before, stats.messages_after,
                                stats.compacted_count, duration, result.summary)

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

    def _compaction_failed(self, exc: Exception) -> None:
        from ..telemetry import CompactError, RecoveryCircuitOpen

        self._failed_compactions += 1
        self.tracer.emit(CompactError(session_id=self.session_id, error_type=type(exc).__name__,
                                      message=str(exc), fallback="none"))
        if self._failed_compactions >= CIRCUIT_BREAKER_FAILURES and not self.paused:
            self.paused = True
            self.tracer.emit(RecoveryCircuitOpen(
                session_id=self.session_id, failures=self._failed_compactions,
                reason=f"{self._failed_compactions} compactions failed in a row; automatic compaction paused"))

    def _archive_transcript(self, view: list[Message]) -> int:
        with self.tracer.span("compact.archive", kind=ARCHIVE_KIND, messages=len(view)) as span:
            number = self._archive_transcript_now(view)
            span.set(transcript=number)
            return number

    def _archive_transcript_now(self, view: list[Message]) -> int:
        self._archived += 1
        self._archived_seq = self._seq  # every message added so far is now in an archived transcript
        if self.archive is None:
            if self.redactor is not None:  # no archive to redact, but the redactor must still learn the secrets
                self._redact_view(view)  # that summaries may repeat without their context
            return self._archived
        if self.redactor is None:
            return int(self.archive.archive_transcript(self.session_id, view))
        messages = self._redact_view(view)
        # The archive redacts with the manager's redactor (see manager_parts._archive): redacting there as well would
        # scan every message twice (the slowest part of compacting a long history).
        same = getattr(self.archive, "redactor", None) is self.redactor
        return int(self.archive.archive_transcript(self.session_id, messages, redacted=same))

    def _redact_view(self, view: Sequence[Message]) -> list[Message]:
        """``view`` redacted, reusing what earlier transcripts redacted: most of a view was archived before.

        Messages are immutable, so one redacted before is redacted the same way again, as long as the redactor
        learned no new secret meanwhile (a remembered secret changes the output): then everything is redone.
        """
        memo = self._redact_memo
        learned = getattr(self.redactor, "_learned", None)
        if learned is None or learned is not self._redact_memo_learned:
            memo.clear()
        out: list[Message] = []
        for m in view:
            known = memo.get(id(m))
            if known is not None and known[0] is m:
                out.append(known[1])
                continue
            redacted = self.redactor.redact_message(m)
            out.append(redacted)
            memo[id(m)] = (m, redacted)
        if len(memo) > _REDACT_MEMO_SIZE:  # keep the memo to about one view: drop what left the view
            kept = {id(m) for m in view}
            for key in [k for k in memo if k not in kept]:
                del memo[key]
        # Learning replaces the redactor's copy-on-write table. A secret learned during this view may repeat in
        # messages redacted before it was found: then nothing is remembered, and the next transcript redoes all.
        after = getattr(self.redactor, "_learned", None)
        if after is not learned:
            memo.clear()
        self._redact_memo_learned = after
        return out

    def _archive_dropped(self) -> None:
        """Archive what normalization removed for good (a result whose call was compacted away, a duplicate)."""
        from ..telemetry import MessagesPruned

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

    # -- compactions that cannot help --------------------------------------------------------------------------
    def _note_stall(self, plan_after: Any, total: int, count: int, rank: int) -> None:
        """Remember a compaction (of strength ``rank``) that left the view over a trigger, and say why."""
        from ..telemetry import CompactWarning

        if plan_after is None:
            self._stalled = None
            return
        self._stalled = (total, count, rank)
        self.tracer.emit(CompactWarning(
            session_id=self.session_id, code="compaction_stalled",
            message=f"compaction left the view over a trigger ({plan_after.reason}); it will not run again until "
                    f"the view grows by {self._regrowth_messages()} messages or {self.policy.clear_at_least} "
                    "tokens"))

    def _stall_holds(self, total: int, count: int, rank: int) -> bool:
        """Whether a compaction of strength ``rank`` would meet the view a compaction could not fix, unchanged.

        A stronger trigger than the stalled one (hard after a soft compaction stalled) always runs.
        """
        stalled = self._stalled
        if stalled is None or rank > stalled[2]:
            return False
        grew = count - stalled[1] >= self._regrowth_messages() or total - stalled[0] >= self.policy.clear_at_least
        if grew:
            self._stalled = None
        return not grew

    def _regrowth_messages(self) -> int:
        return max(1, int(self.policy.emergency_message_count * STALL_REGROWTH_SHARE))

    # -- idle-time compaction -------------------------------------------------------------------------------------
    def compact_in_background(self) -> Future[CompactionResult] | None:
        """Start a soft compaction on a worker thread when the view is over the sleep threshold (50% of the window).

        The result is applied by the next ``prepare()`` only if the view has not been rewritten meanwhile (new
        messages appended at the end are fine: they are kept after the compacted part); otherwise it is dropped
        and the policy plans again. Returns the future, or None when there is nothing to do.
        """
        from ..compaction import compact

        with self._lock:
            # Idle ("sleep") compaction has its own threshold (policy.sleep_pct, 002 §Phase 1).
            sleep = self.policy.sleep_threshold(self.budgets.window)
            automatic = self.policy.enabled and self.policy.auto
            if self._idle is not None or not automatic or self.paused or self.tokens() < sleep:
                return None
            snapshot = self._view.normalized()
            version = self._view.version
            if self._executor is None:
                from concurrent.futures import ThreadPoolExecutor

                self._executor = ThreadPoolExecutor(_IDLE_WORKERS, thread_name_prefix="contextfold-idle")
            future: Future[CompactionResult] = self._executor.submit(
                compact, snapshot, policy=self.policy, counter=self.counter, summarizer=self.summarizer,
                budget=self.budgets.hard - self._tool_tokens, kind="soft", compaction_count=self._compactions,
                clock=self._clock)
            self._idle = (version, len(snapshot), future)
            self._idle_snapshot = snapshot
            return future

    def _apply_idle_result(self) -> None:
        from ..errors import ContextfoldError
        from ..telemetry import CompactWarning

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
            self.tracer.emit(MessagesPruned(session_id=self.session_id, count=len(removed),
                                            ids=tuple(str(m.meta.get("id", "")) for m in removed),
                                            kept={reason: len(new)}))
            return len(removed)


def _with_tail(result: CompactionResult, tail: Sequence[Message]) -> CompactionResult:
    from dataclasses import replace

    return replace(result, messages=[*result.messages, *tail])


def _protected_names(view: Sequence[Message]) -> tuple[str, ...]:
    """``id`` (and ``label`` when set) of the pinned and protected messages of ``view``, for the trace."""
    names = []
    for m in view:
        if m.protected or m.role in ("system", "developer"):
            label = m.meta.get("label")
            names.append(f"{m.meta.get('id', '')}{f' ({label})' if label else ''}")
    return tuple(names)
