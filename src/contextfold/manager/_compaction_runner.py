"""Running compactions on a manager's view: when its policy calls for one, on request, and in the background.

:class:`CompactionRunner` acts on the policy's decision each turn (masking first, then a compaction when one is still
due and pays for itself), runs a compaction (its budget, the answered messages cut shorter when they crowd it out,
the summary, the rules that decline it) and applies the result to the view: the application's hook, the transcript
archived, the receipt, the events. It also starts idle ("sleep") compactions on a worker thread and applies their
results. What a compaction computes is the :class:`~contextfold.manager._compactor.Compactor`'s; the view, the
lock and the counters stay the manager's (``contextfold.manager._manager``), which holds one runner.
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ..compaction import Action, decide
from ..telemetry.events import TokenEstimate, TriggerDecision
from ._compactor import protected_names, with_tail
from ._intake import WARM_AT_SHARE_OF_SOFT, Intake
from ._spans import COMPACT_KIND

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..compaction import Budgets, CompactionResult, Plan, Policy
    from ..messages import Message
    from ..provider_context import ProviderContext
    from ..steering import Steering
    from ..summarize import Summarizer
    from ..telemetry import Tracer
    from ..tokens import MessageCounter, ModelInfo
    from ._archiver import Archiver
    from ._build import CompactionReport
    from ._cache_economics import CacheEconomics
    from ._compactor import Compactor
    from ._exact_figures import ExactFigures
    from ._idle import IdleCompactions
    from ._masking import Masking
    from ._request_extras import RequestExtras
    from ._secrets import SessionSecrets
    from ._view import View

__all__ = ["COMPACTION_RANK", "CompactionHost", "CompactionRunner"]

_log = logging.getLogger("contextfold.manager._manager")  # (the manager's logger, as before the move)

# Compaction actions by strength: a compaction is stuck when the view still calls for one at least as strong.
# (Keyed by the actions' values: Action is a StrEnum.)
COMPACTION_RANK = {"soft": 1, "hard": 2, "emergency": 3}


class CompactionHost(Protocol):
    """What :class:`CompactionRunner` uses of its manager (``contextfold.manager._manager``, which imports this)."""

    _compactions: int
    _grounding: tuple[int, int, int] | None
    _warm_after_policy: bool
    last_plan: Plan | None

    @property
    def budgets(self) -> Budgets: ...
    @property
    def cache(self) -> Any: ...
    @property
    def counter(self) -> MessageCounter: ...
    @property
    def model(self) -> ModelInfo: ...
    @property
    def policy(self) -> Policy: ...
    @property
    def tracer(self) -> Tracer: ...
    @property
    def session_id(self) -> str: ...
    @property
    def steering(self) -> Steering: ...
    @property
    def provider_context(self) -> ProviderContext: ...
    @property
    def defer_soft(self) -> bool: ...
    @property
    def before_compaction(self) -> Callable[[list[Message], Any], None] | None: ...
    @property
    def summarizer(self) -> Summarizer: ...
    @property
    def paused(self) -> bool: ...
    @property
    def _lock(self) -> AbstractContextManager[Any]: ...
    @property
    def _clock(self) -> Any: ...
    @property
    def _view(self) -> View: ...
    @property
    def _extras(self) -> RequestExtras: ...
    @property
    def _compactor(self) -> Compactor: ...
    @property
    def _economics(self) -> CacheEconomics: ...
    @property
    def _masking(self) -> Masking: ...
    @property
    def _secrets(self) -> SessionSecrets: ...
    @property
    def _archiver(self) -> Archiver: ...
    @property
    def _idle(self) -> IdleCompactions: ...
    @property
    def _intake(self) -> Intake: ...
    @property
    def _policy_summary(self) -> dict[str, object]: ...
    @property
    def _tool_tokens(self) -> int: ...
    def tokens(self) -> int: ...
    def _plan(self) -> tuple[Plan, int, int, int, int]: ...
    def _grounded(self, counted: int) -> int: ...
    def _count_exactly(self) -> None: ...
    def _exact_figures(self) -> ExactFigures: ...
    def _effective_policy(self) -> Policy: ...
    def _archive_transcript(self, view: list[Message]) -> int: ...


def _removed_ids(removed: Sequence[Message]) -> tuple[str, ...]:
    """Each removed message's ``meta["id"]`` as a string ("" without one), read by C loops (100,000 at once)."""
    return tuple(map(str, map(_ID_OR_EMPTY, map(_META_OF, removed))))


_META_OF = operator.attrgetter("meta")
_ID_OR_EMPTY = operator.methodcaller("get", "id", "")


class CompactionRunner:
    """Runs the compactions of one manager's view and applies their results (see the module's docstring)."""

    def __init__(self, manager: CompactionHost) -> None:
        self.manager = manager

    def run_policy(self) -> None:
        """Act on the policy's decision (``prepare()``): masking first, then a compaction if one is still due."""
        manager = self.manager
        started = time.perf_counter()
        provisional = manager.counter.provisional  # (before the count: see ContextManager._prepare_view)
        plan, tokens, total, tool_tokens, count = manager._plan()
        manager.last_plan = plan
        if provisional:  # (byte bounds: the figures are counted exactly where the event is built)
            manager.tracer.emit_deferred(TokenEstimate, manager._exact_figures().estimate, model=manager.model.name,
                                         context_window=manager.budgets.window)
        else:
            system, developer = manager._view.pinned_tokens()
            manager.tracer.emit_new(TokenEstimate, messages=tokens - system - developer,
                                    tools_schema=manager._extras.tokens, system=system, developer=developer,
                                    model=manager.model.name, context_window=manager.budgets.window)
        # The new messages are read ahead once the policy has acted (see ContextManager._prepare_view).
        manager._warm_after_policy = (bool(manager._intake.unwarmed)
                                      and total >= manager.budgets.soft * WARM_AT_SHARE_OF_SOFT)
        if plan.action is Action.NONE:
            manager._masking.due(manager.budgets)
            return
        manager.tracer.emit_new(TriggerDecision, triggered=True, action=str(plan.action), reason=plan.reason,
                                tokens=total, threshold_tokens=self.threshold(plan), policy=manager._policy_summary)
        if manager.cache is not None and plan.action is not Action.EMERGENCY:
            # Masking loses nothing (every output stays readable by ref), so it goes first: down to the tool-output
            # budget, and when the view is over soft, far enough to get it back under soft with some headroom.
            forced = total > manager.budgets.hard
            if plan.action is Action.MASK:
                masked = manager._masking.mask(manager.budgets.tool_output_budget, manager.budgets,
                                               required=manager.policy.clear_at_least, total=total, forced=forced)
            else:
                masked = manager._masking.before_summary(total, tool_tokens, manager.budgets,
                                                         min_saving=manager._compactor.min_saving(total))
            if masked == "waits":
                return  # under hard, a rewrite that does not pay for the cache waits; a summary would cost more
            tokens, tool_tokens, count = manager._view.totals()
            total = manager._grounded(tokens + manager._tool_tokens)
            if masked == "applied":
                # A floor like the one a compaction leaves (below): a summary in a later call waits until the view
                # has grown clear_at_least since this batch (issue 25: one a few calls after it paid the cache again
                # and summarized outputs the batch had just masked; claude4sonnet at OpenAI's rates 99.0 -> 99.4%)
                manager._compactor.floor = total
        else:
            forced, masked = False, "skipped"
        if plan.action is not Action.EMERGENCY:
            # Masking has done what it could (protected, excluded and recent outputs stay; there may be no cache):
            # decide again with nothing left to mask, or a MASK plan would leave the view over its threshold.
            plan = manager.provider_context.gate(
                decide(total, count, 0, manager.budgets, manager._effective_policy()), total)
            manager.last_plan = plan
            if plan.action is Action.NONE:
                return
        # The masking the hard threshold forced has paid for rewriting the history; a compaction still due joins it
        # in this call (one rewrite, not two a few calls apart), whatever the cache economics and the floor: the hard
        # one (it lands lowest) when the masking left the view above halfway to hard, else the soft one.
        joined = forced and masked == "applied" and plan.action is Action.SOFT and manager._economics.joins_forced()
        if joined and total > (manager.budgets.soft + manager.budgets.hard) // 2:
            plan = decide(manager.budgets.hard + 1, count, 0, manager.budgets, manager._effective_policy())
        if plan.action is Action.SOFT and manager.defer_soft:
            return  # someone else compacts (last_plan says it is due)
        floor = manager._compactor.floor
        if (plan.action is Action.SOFT and not joined and masked != "applied" and floor is not None
                and total - floor < manager.policy.clear_at_least):
            # The view grew too little since the last rewrite (a compaction, or a masking batch in an earlier call)
            # for a summary to pay off; hard still fires. A summary in the batch's own call joins its rewrite.
            return
        rank = COMPACTION_RANK[plan.action]
        # A view over hard is never handed to the model while a compaction could still help, stalled or not.
        if total <= manager.budgets.hard and not joined and manager._compactor.stall_holds(total, count, rank):
            return
        if plan.action in (Action.HARD, Action.EMERGENCY):
            self._warn_emergency(plan)
        from ..errors import ContextfoldError

        try:
            report = self.compact(str(plan.action), instructions=None, started=started, automatic=True,
                                  joined=joined)
            if joined and not report.compacted and plan.action is not Action.SOFT:
                # Keep counts held the hard compaction where the view is: the soft summary of the oldest part joins.
                plan = decide(total, count, 0, manager.budgets, manager._effective_policy())
                rank = COMPACTION_RANK[plan.action]
                report = self.compact(str(plan.action), instructions=None, started=started, automatic=True,
                                      joined=True)
        except ContextfoldError as exc:
            if manager.policy.on_compaction_failure == "raise":
                raise
            # 004 §1 graceful degradation: the failure is already a compact.error event (and counts towards the
            # circuit breaker); the model gets the view as it is, and a real overflow goes to overflow recovery.
            _log.warning("compaction failed (%s: %s); sending the view uncompacted", type(exc).__name__, exc)
            return
        if not report.compacted and manager._economics.waited:
            return  # waiting for the cache to pay is not a stall: the next calls weigh it again
        after, _, total, _, count = manager._plan()
        # Still over the trigger that fired (or a higher one): compacting again before the view grows would loop.
        stuck = COMPACTION_RANK.get(after.action, 0) >= rank
        manager._compactor.note_stall(after if stuck else None, total, count, rank)

    def _warn_emergency(self, plan: Plan) -> None:
        """Full compaction at the start of a turn is the emergency path of 002 §Phase 2: log it and report it."""
        from ..telemetry import CompactWarning

        manager = self.manager
        message = (f"{plan.action} compaction before the model call: {plan.reason} (idle compaction did not keep the "
                   "view under the threshold)")
        _log.warning(message)
        manager.tracer.emit(CompactWarning(session_id=manager.session_id, message=message, code="emergency"))

    def threshold(self, plan: Plan) -> int:
        """The threshold a decision was taken against: hard for hard and emergency compaction, soft otherwise."""
        manager = self.manager
        return manager.budgets.hard if plan.action in (Action.HARD, Action.EMERGENCY) else manager.budgets.soft

    def compact(self, kind: str, *, instructions: str | None, started: float,
                automatic: bool = False, joined: bool = False) -> CompactionReport:
        """Compact the view now (``kind``: soft, hard or emergency) in a span of its own; the report."""
        from ._collector import collector_paused

        manager = self.manager
        # (a long history's compaction keeps all it builds until it returns: collections then free nothing of it)
        with (manager.tracer.span(f"compact.{kind}", kind=COMPACT_KIND, automatic=automatic) as span,
              collector_paused(manager._view.totals()[2])):
            report = self._compact_in_span(kind, instructions=instructions, started=started, automatic=automatic,
                                           joined=joined)
            span.set(applied=report.compacted > 0, tokens_before=report.tokens_before,
                     tokens_after=report.tokens_after, messages_before=report.messages_before,
                     messages_after=report.messages_after, compacted=report.compacted)
        if report.compacted:
            manager.tracer.wake()  # the compaction's events go out now, not after the batch delay
        return report

    def _compact_in_span(self, kind: str, *, instructions: str | None, started: float,
                         automatic: bool, joined: bool = False) -> CompactionReport:
        from ..errors import ContextfoldError
        from ..steering import without_receipts
        from ..summarize.extractive import ExtractiveSummarizer
        from ..telemetry import CompactWarning
        from ._build import CompactionReport
        from ._spans import TracedSummarizer

        manager = self.manager
        manager._count_exactly()
        manager._secrets.catch_up()  # the summary is written from redacted text: every secret of the session known
        found = manager._view.normalized()
        view = without_receipts(found)  # the last compaction's receipt: replaced by this one's, never summarized
        # The provider's last usage said the view counts more than we count: the compaction's budget, which it
        # measures with our counter, shrinks by the difference, or "nothing to compact" could leave a view the
        # provider counts over hard (a property test found 1,001 over 1,000 after a usage 1.6x our count).
        # At most half the budget, though: a larger gap is more likely a count of something else than of this view
        # (overflow recovery reports the provider's figure; compaction must still have room to work).
        tokens, _, _ = manager._view.totals()
        undercount = max(0, manager._grounded(tokens + manager._tool_tokens) - (tokens + manager._tool_tokens))
        reserved = (manager._tool_tokens + manager.steering.compaction_reserve
                    + min(undercount, max(0, manager.budgets.hard - manager._tool_tokens) // 2))
        # The view's own counts and pairs, when no receipt was taken out of it (planning does not make them again).
        counted = (manager._view.counts(), manager._view.pairs()) if len(view) == len(found) else None
        budget, plan = manager._compactor.target(view, kind, reserved, low=manager._economics.aims_low, counted=counted,
                                                 checked=manager._view.checked)
        shrunk = manager._compactor.shrink_answered(view, budget,
                                                    manager._view.answered() if counted is not None else None)
        before_recut: list[Message] | None = None
        recut_note = ""
        if shrunk is not view:
            # Every full output is in the tool output cache under its ref: the harder cut loses nothing.
            recut = sum(1 for old, new in zip(view, shrunk, strict=True) if old is not new)
            before_recut = found
            manager._view.replace(shrunk, checked=manager._view.checked)
            recut_note = (f"the {recut} answered message{'s' if recut != 1 else ''} (tool results or the user's "
                          f"request) took over half of the compaction budget ({budget:,} tokens): each was cut to a "
                          "shorter view, readable in full by its ref")
            view = manager._view.normalized()
            # the dry run was of the old view
            budget, plan = manager._compactor.target(view, kind, reserved, low=manager._economics.aims_low,
                                                     counted=(manager._view.counts(), manager._view.pairs()),
                                                     checked=manager._view.checked)
        if automatic and kind == "soft" and plan is None:
            # Declined whatever the summary says (what stays already takes too much): no summary is computed.
            early, plan = manager._compactor.declined_unsummarized(
                view, budget, counted if before_recut is None else (manager._view.counts(), manager._view.pairs()))
            if early is not None:
                if before_recut is not None:
                    manager.tracer.emit(CompactWarning(session_id=manager.session_id, code="answered_recut",
                                                       message=recut_note))
                manager._economics.waited = False
                manager._compactor.floor = early[0] + manager._tool_tokens
                return CompactionReport.unchanged(early[0], early[1], (time.perf_counter() - started) * 1000)
        try:
            result = manager._compactor.run(view, kind=kind, budget=budget, plan=plan, instructions=instructions,
                                            summarizer=TracedSummarizer(
                                             manager._secrets.guard(manager.summarizer), manager.tracer,
                                             local=isinstance(manager.summarizer, ExtractiveSummarizer)),
                                            compaction_count=manager._compactions)
        except ContextfoldError:
            if before_recut is not None:
                # a compaction that fails leaves the view as it found it
                manager._view.replace(before_recut, checked=manager._view.checked)
            raise
        if before_recut is not None:
            manager.tracer.emit(CompactWarning(session_id=manager.session_id, code="answered_recut",
                                               message=recut_note))
        # Nothing compactable, or (automatic soft) summarizing what masking already shrank would save too little
        # to be worth a prompt-cache miss: keep the view, and wait until it has grown (or hard compaction is due).
        # ``joined``: the compaction rides on a rewrite a forced masking has paid for; it still has to save enough
        # to be worth losing detail over (it would not, when keep counts hold the view where it is).
        manager._economics.waited = False
        saved = result.stats.tokens_before - result.stats.tokens_after
        declined = automatic and (
            (kind == "soft" and not (manager._compactor.worth_applying(result)
                                     and (joined or self._soft_pays(view, result))))
            # a hard compaction joining a forced masking must buy at least one call of room for what it loses
            or (joined and kind != "soft" and saved < manager._economics.growth_per_turn))
        if not result.changed or declined:
            if declined:
                manager._compactor.floor = result.stats.tokens_before + manager._tool_tokens
            elif undercount and manager._grounded(tokens + manager._tool_tokens) > manager.budgets.hard:
                # Nothing left to compact, and the provider's last count still puts the view over hard: the count
                # cannot be met (a usage report of something else, or a view that is all pinned). Keeping it would
                # refuse every later call of the session; it is dropped, said, and the next usage report counts.
                manager._grounding = None
                manager.tracer.emit(CompactWarning(
                    session_id=manager.session_id, code="usage_count_dropped",
                    message=f"the provider's last count exceeds our count of this view by {undercount:,} tokens and "
                            f"nothing is left to compact; that count is set aside until the next usage report"))
            stats = result.stats
            return CompactionReport.unchanged(stats.tokens_before, stats.messages_before,
                                              (time.perf_counter() - started) * 1000)
        return self.apply(view, result, started)

    def keeps_wide(self, index: int, wide: Message, standard: Message) -> bool:
        """Whether the wider answered output at ``index`` of the history stays (``CacheEconomics.keeps_wide``)."""
        manager = self.manager
        tokens, _, _ = manager._view.totals()
        return manager._economics.keeps_wide(manager._view.raw, index, wide, standard,
                                             tokens=manager._grounded(tokens + manager._tool_tokens),
                                             pinned=sum(manager._view.pinned_tokens()), hard=manager.budgets.hard)

    def _soft_pays(self, view: list[Message], result: CompactionResult) -> bool:
        """Whether an automatic soft compaction pays for the prompt cache it invalidates (``CacheEconomics``)."""
        manager = self.manager
        if not manager._economics.enabled or not result.changed:
            return True
        first = next((i for i, (old, new) in enumerate(zip(view, result.messages, strict=False)) if old is not new),
                     min(len(view), len(result.messages)))
        stats = result.stats
        return manager._economics.weigh(view, action="soft", change_at_index=first,
                                        freed=stats.tokens_before - stats.tokens_after,
                                        tokens=stats.tokens_before + manager._tool_tokens,
                                        pinned=sum(manager._view.pinned_tokens()), hard=manager.budgets.hard).act

    def apply(self, view: list[Message], result: CompactionResult, started: float) -> CompactionReport:
        """Replace ``view`` by the compacted one: the hook first, then the transcript archived, then the events."""
        from ..steering import insert_receipt
        from ..telemetry import CompactWarning, MessagesPruned, SummaryCreated
        from ._build import CompactionReport

        manager = self.manager
        self._run_before_compaction(result)
        number = manager._archive_transcript(view)
        covered = result.summary_message.meta.get("compacted_count") if result.summary_message is not None else None
        receipt = manager.steering.receipt(result.summarized or result.removed,
                                           covered if isinstance(covered, int) else None)
        manager._view.replace(insert_receipt(result.messages, receipt) if receipt is not None else result.messages,
                              checked=manager._view.checked)
        manager._archiver.forget_removed(view, result.messages)
        manager.steering.note_compacted(result.stats.compacted_count)
        manager._compactions += 1
        manager._compactor.floor = result.stats.tokens_after + manager._tool_tokens
        stats = result.stats
        if result.summary is not None:
            manager._archiver.summary(number, {"summary": result.summary.summary, "retain": list(result.summary.retain),
                                               "summarizer": result.summary.summarizer, "stats": stats.to_dict()})
            manager.tracer.emit(SummaryCreated(
                session_id=manager.session_id, strategy=manager.policy.strategy, input_messages=stats.compacted_count,
                input_tokens=stats.tokens_before, summary_tokens=stats.summary_tokens,
                summary=manager._archiver.redact_text(result.summary.summary), model=result.summary.summarizer,
                summary_version=stats.summary_version))
        manager.tracer.emit(MessagesPruned(session_id=manager.session_id, count=len(result.removed),
                                           ids=_removed_ids(result.removed),
                                           kept={**stats.kept, "recent_turns": stats.keep_turns,
                                                 "tool_pairs": stats.keep_pairs},
                                           protected=protected_names(result.messages)))
        for warning in result.warnings:
            manager.tracer.emit(CompactWarning(session_id=manager.session_id, message=warning, code="compaction"))
        duration = (time.perf_counter() - started) * 1000
        return CompactionReport(stats.tokens_before, stats.tokens_after, stats.messages_before, stats.messages_after,
                                stats.compacted_count, duration, result.summary, kept=dict(stats.kept))

    def _run_before_compaction(self, result: CompactionResult) -> None:
        """The application's pre-compaction hook (002: consolidate facts before messages leave the view).

        It sees the messages about to leave and the summary replacing them; a failing hook is reported, never
        allowed to stop the compaction (the archive keeps everything anyway).
        """
        from ..telemetry import CompactWarning

        manager = self.manager
        hook = manager.before_compaction
        if hook is None or not result.removed:
            return
        try:
            hook(list(result.removed), result.summary)
        except Exception as exc:  # the application's code: report it and go on
            manager.tracer.emit(CompactWarning(session_id=manager.session_id, code="hook_failed",
                                               message=f"before_compaction hook failed: {type(exc).__name__}: {exc}"))

    def compact_in_background(self) -> Future[CompactionResult] | None:
        """What :meth:`ContextManager.compact_in_background` does (taking the manager's lock)."""
        from ._compactor import compact_after_boundary
        from ._idle import ForgettableSummarizer

        manager = self.manager
        with manager._lock:
            # Idle ("sleep") compaction has its own threshold (policy.sleep_pct, 002 §Phase 1).
            sleep = manager.policy.sleep_threshold(manager.budgets.window)
            automatic = manager.policy.enabled and manager.policy.auto
            if manager._idle.pending or not automatic or manager.paused or manager.tokens() < sleep:
                return None
            from ..steering import without_receipts

            snapshot = manager._view.normalized()
            compactable = without_receipts(snapshot)  # the last receipt is replaced by the new one, not summarized
            # (The summary is computed away from the lock: the summarizer learns the whole view's secrets itself.)
            # (Forgettable: a job add()'s rollback forgets stops before its summarizer's call, see _idle.)
            summarizer = ForgettableSummarizer(manager._secrets.guard(manager.summarizer, context=snapshot))
            count = manager._compactions
            budget = manager.budgets.hard - manager._tool_tokens - manager.steering.compaction_reserve
            policy = manager._compactor.policy  # per-tool rules included (summarize: false)
            return manager._idle.start(snapshot, manager._view.version, lambda: compact_after_boundary(
                compactable, policy=policy, counter=manager.counter, summarizer=summarizer, budget=budget,
                kind="soft", compaction_count=count, clock=manager._clock), summarizer)

    def apply_idle_result(self) -> None:
        """Apply a finished idle compaction, unless the view was rewritten meanwhile or it saves too little."""
        manager = self.manager
        if not manager._idle.pending:
            return  # (every prepare() asks: reading the whole view for nothing would cost O(history) per call)
        from ..telemetry import CompactWarning

        outcome = manager._idle.take(manager._view.normalized(), manager._view.version)
        if outcome is None:
            return
        if outcome.error is not None:
            manager._compactor.failed_with(outcome.error)
            return
        if outcome.discarded or outcome.result is None:
            manager.tracer.emit(CompactWarning(session_id=manager.session_id, code="idle_discarded",
                                               message="background compaction dropped: the view changed meanwhile"))
            return
        if not manager._compactor.worth_applying(outcome.result):
            manager._compactor.floor = outcome.result.stats.tokens_before + manager._tool_tokens  # too little saved
            return
        self.apply(list(outcome.snapshot), with_tail(outcome.result, outcome.tail), time.perf_counter())
