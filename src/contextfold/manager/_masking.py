"""Masking old tool outputs in the view: which go first, how far, and whether a batch pays for the cache it breaks.

Masking replaces old tool outputs by a placeholder (a digest and the ref that reads the output back): nothing is
lost. It rewrites the middle of the history, so the provider's cached prefix is lost from the first masked message
on. Hence the batching rules: a masking happens only when it frees at least ``required`` tokens (``clear_at_least``
on a plain masking turn; before a summary, what a soft compaction would have to save), and, under the hard
threshold, only when what it frees pays for the cache it invalidates (``CacheEconomics``); over hard it is forced.
Which outputs go first and which stay is steering's call (superseded reads, per-tool turn rules, protected tools).

The manager holds the lock and decides when to mask (its turn flow); this module does the masking and keeps count.
Imports are deferred: ``from contextfold import ContextManager`` loads this module and nothing else of the library's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from .._lazy import LazyModule
from ._spans import MASK_KIND

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..billing.economics import RewriteVerdict
    from ..cache import ToolOutputCache
    from ..cache.masking import MaskResult
    from ..compaction import Budgets, Policy
    from ..messages import Message
    from ..pairing import ToolPair
    from ..steering import Steering
    from ..steering.resources import SupersededFold
    from ..telemetry import Tracer
    from ..telemetry import events as _events
    from ..tokens import MessageCounter
    from ._cache_economics import CacheEconomics
    from ._secrets import SessionSecrets
    from ._view import View
else:  # (a masking's event: imported when first used, not with the manager, then no import statement per masking)
    _events = LazyModule("..telemetry.events", __package__)

__all__ = ["MASK_HEADROOM", "Masking", "keep_layout"]

# Masking to get under the soft threshold aims at 80% of it, so that the next turns do not mask again at once.
MASK_HEADROOM = 0.8

Outcome = Literal["applied", "skipped", "waits"]


class Masking:
    """The masking of one session's view (see the module docstring); ``count`` is the passes applied."""

    def __init__(self, *, cache: ToolOutputCache | None, view: View, counter: MessageCounter, policy: Policy,
                 steering: Steering, economics: CacheEconomics, secrets: SessionSecrets, tracer: Tracer,
                 session_id: str) -> None:
        self.cache = cache
        self._view = view
        self._counter = counter
        self._policy = policy
        self._steering = steering
        self._economics = economics
        self._secrets = secrets
        self._tracer = tracer
        self._session_id = session_id
        self.count = 0
        # The call whose batch was applied last, and the last message before that batch's first change.
        self._bridge: tuple[int, Message] | None = None
        # The superseded reads of the view's settled prefix, at a version of the view (see superseded_ahead).
        self._fold: tuple[int, SupersededFold] | None = None

    def before_summary(self, total: int, tool_tokens: int, budgets: Budgets, *, min_saving: int) -> Outcome:
        """Mask before a compaction summarizes: far enough to get the view back under soft with some headroom.

        A summary breaks the prompt cache too and loses what it drops, so a masking that does the job is worth
        what a soft compaction must save (``min_saving``), not ``clear_at_least``: in small windows the larger
        figure let the summary win every time.
        """
        wanted = total - int(budgets.soft * MASK_HEADROOM)
        budget = min(budgets.tool_output_budget, max(0, tool_tokens - wanted))
        forced = total > budgets.hard
        return self.mask(budget, budgets, required=0 if forced else min_saving, total=total, forced=forced)

    def mask(self, budget_tokens: int, budgets: Budgets, *, required: int = 0, total: int | None = None,
             forced: bool = True, only_due: bool = False) -> Outcome:
        """Mask old tool outputs down to ``budget_tokens``; skip it when it would free less than ``required``.

        When ``forced`` is off, only when what it frees pays for the cache it invalidates. Returns ``"applied"``,
        ``"skipped"`` (nothing to mask or too little) or ``"waits"`` (it would not pay).
        """
        if self.cache is None:
            return "skipped"
        # A placeholder's digest must not quote a secret found elsewhere in the session. (Nothing kept for a summary:
        # a compaction after this masking learns nothing more, and its request is looked up as any.)
        self._secrets.catch_up(for_summary=False)
        view = self._view.normalized()
        # The view keeps its pairs and each message's tokens (issue 22): neither is derived again per masking turn.
        pairs, counts = self._view.pairs(), self._view.counts()
        p = self._policy
        # Which outputs go first (superseded reads, per-tool turns) and which stay (per-tool rules): steering's call.
        order = self._steering.mask_order(view, pairs, self._superseded(view, pairs))
        if only_due:  # the outputs whose tool's turns have passed, and nothing else
            from ..steering import MaskOrder

            due = set(order.due)
            order = MaskOrder(order.due, frozenset(i for i, m in enumerate(view) if m.role == "tool" and i not in due))

        def batch(budget: int) -> MaskResult:
            assert self.cache is not None
            return self.cache.mask(
                view, counter=self._counter, budget_tokens=budget,
                # A tool's own mask_after_turns is more specific than the session-wide keep count.
                keep_tool_io_pairs=0 if only_due else p.keep_tool_io_pairs,
                exclude_tools=(*p.exclude_tools, *p.protected_tools),
                clear_at_least=p.clear_at_least, clear_tool_inputs=p.clear_tool_inputs,
                digest_tokens=p.mask_digest_tokens, digest_kind=p.mask_digest, first=order.first,
                exempt=order.exempt, pairs=pairs, counts=counts,
            )

        with self._tracer.span("compact.mask", kind=MASK_KIND, budget_tokens=budget_tokens) as span:
            result = batch(budget_tokens)
            verdict: RewriteVerdict | None = None
            if total is not None and self._economics.enabled and not forced:
                if not only_due and budget_tokens > 0:
                    result, verdict = self._deepest_paying(result, batch, counts, total, budgets)
                elif result.masked_indices:
                    verdict = self._assess(result, counts, total, budgets)
            if not result.masked_indices or result.tokens_freed < required:
                span.drop()  # nothing applied: the view did not change, so there is nothing to show
                return "skipped"
            if total is not None and self._economics.enabled:
                if forced or verdict is None:
                    self._economics.forced("mask", tokens=total, freed=result.tokens_freed)
                elif not self._economics.record("mask", verdict, tokens=total, freed=result.tokens_freed).act:
                    span.drop()
                    return "waits"
            span.set(masked=len(result.masked_indices), tokens_freed=result.tokens_freed)
            self._apply(view, result)
            return "applied"

    def _superseded(self, view: Sequence[Message], pairs: Sequence[ToolPair]) -> dict[int, int] | None:
        """``superseded_reads`` of ``view`` (the view's own): its settled prefix's kept, only the pairs after it read.

        The prefix's are the fold kept for the view's version (taken on by the read-ahead as the prefix grows, or by
        an earlier turn); a rewrite of the prefix (a masking) changes the version, and the read-ahead reads them
        again (issue 22: every masking turn read every call of the view, ~0.15 ms of the heaviest).
        """
        if not self._steering.superseded:
            return None
        rule_for = self._steering.policies.resource_rule
        version, settled = self._view.version, self._view.prefix_pairs()
        kept = self._fold
        if kept is not None and kept[0] == version and kept[1].pairs <= settled:
            fold = kept[1]  # (most turns: the read-ahead kept it, and nothing is imported)
        else:
            from ..steering.resources import SupersededFold

            fold = SupersededFold()
        if fold.pairs < settled:
            fold = fold.copy()  # (a kept fold never changes: the read-ahead may be copying it)
            fold.read(view, rule_for, pairs[fold.pairs : settled])
            self._fold = (version, fold)
        whole = fold.copy()
        whole.read(view, rule_for, pairs[settled:])
        return whole.out

    def superseded_ahead(self) -> tuple[Callable[..., Any], tuple[Any, ...]] | None:
        """The read-ahead's part that takes the settled prefix's superseded reads on for the next masking turn.

        None when none is needed (superseded reads off, or the fold kept is the whole prefix's at the view's version).
        What the part reads is handed over on the agent's thread: the stored messages (the prefix's never change at
        a version, and later ones are only appended) and the prefix's pairs not folded yet. Its fold is kept only
        while the view is at that version.
        """
        if not self._steering.superseded or self.cache is None:
            return None
        version, kept, settled = self._view.version, self._fold, self._view.prefix_pairs()
        start = kept[1] if kept is not None and kept[0] == version and kept[1].pairs <= settled else None
        if start is not None and start.pairs == settled:
            return None
        return self._fold_ahead, (version, start, self._view.raw, self._view.prefix_pairs_from(start.pairs if start
                                                                                               is not None else 0))

    def encode_ahead(self, outputs: Sequence[tuple[Message, str]]) -> None:
        """Count and encode the masked messages the read-ahead built for ``outputs`` (a read-ahead part, after them).

        The masking turn that swaps one in (``cache.masking``) then finds its count and its item in the view's
        encodings made (:meth:`View.encode_ahead`).
        """
        if self.cache is None or not outputs:
            return
        masked = self.cache.placeholders.masked_for([m for m, _ in outputs])
        if masked:
            self._view.encode_ahead(masked)

    def _fold_ahead(self, version: int, start: SupersededFold | None, messages: Sequence[Message],
                    pairs: Sequence[ToolPair]) -> None:
        if self._view.version != version:
            return  # (rewritten since: read again after it)
        if start is not None:
            fold = start.copy()  # (most turns: no import statement, ~2 us warm and more on a job's cold caches)
        else:
            from ..steering.resources import SupersededFold

            fold = SupersededFold()
        fold.read(messages, self._steering.policies.resource_rule, pairs)
        kept = self._fold
        if self._view.version == version and (kept is None or kept[0] != version or kept[1].pairs < fold.pairs):
            self._fold = (version, fold)

    def _assess(self, result: MaskResult, counts: Sequence[int], total: int, budgets: Budgets) -> RewriteVerdict:
        at = min(result.masked_indices)
        return self._economics.assess(change_at=sum(counts[:at]), freed=result.tokens_freed, tokens=total,
                                      pinned=sum(self._view.pinned_tokens()), hard=budgets.hard)

    def _deepest_paying(self, shallow: MaskResult, batch: Callable[[int], MaskResult], counts: Sequence[int],
                        total: int, budgets: Budgets) -> tuple[MaskResult, RewriteVerdict | None]:
        """The batch to weigh: ``shallow`` (what the thresholds ask), or every output masking may take.

        A rewrite's cost is the cached view it invalidates, nearly the same whichever outputs it masks; what it saves
        grows with what it frees. When the shallow batch does not pay but the deep one frees enough to take the place
        of the rewrite the hard threshold would force within the session's expected turns (``weigh_rewrite``: one
        rewrite either way, and the calls after it append for long), the deep one is taken. A shallow batch that
        pays stays as it is: it keeps more outputs whole (at OpenAI's prices it nearly always pays, and views there
        do not change).
        """
        verdict = self._assess(shallow, counts, total, budgets) if shallow.masked_indices else None
        if verdict is not None and verdict.act:
            return shallow, verdict
        deep = batch(0)
        if deep.tokens_freed <= shallow.tokens_freed:
            return shallow, verdict
        deep_verdict = self._assess(deep, counts, total, budgets)
        return (deep, deep_verdict) if deep_verdict.replaces_forced else (shallow, verdict)

    def due(self, budgets: Budgets) -> None:
        """Mask the outputs whose tool's ``mask_after_turns`` passed, once they free ``clear_at_least`` together.

        Batched like any masking (each pass costs the provider's cached prefix from the first change on).
        """
        if self.cache is None or not self._policy.enabled or not self._steering.policies.turn_rules:
            return
        view = self._view.normalized()
        due = self._steering.mask_order(view).due
        if not due:
            return
        due_tokens = sum(self._counter.count_message(view[i]) for i in due)
        if due_tokens >= self._policy.clear_at_least and self._counter.provisional:
            # Byte upper bounds said "mask": only exact counts may decide it.
            self._counter.wait_exact()
            due_tokens = sum(self._counter.count_message(view[i]) for i in due)
        if due_tokens >= self._policy.clear_at_least:
            self.mask(0, budgets, required=self._policy.clear_at_least, only_due=True)

    def bridge(self, view: Sequence[Message]) -> int | None:
        """In the call a batch was applied in, the index of the last message before the batch's turn; else None.

        The previous request's second cache mark was there (or before it): the request marks it too, so that it
        reads that entry (:func:`contextfold.billing.breakpoints.breakpoint_indices`).
        """
        if self._bridge is None or self._bridge[0] != self._economics.calls:
            return None
        target = self._bridge[1]
        return next((i for i, m in enumerate(view) if m is target), None)

    def settled(self, view: Sequence[Message] | None = None) -> frozenset[int]:
        """The tool results of ``view`` no masking batch will ever change, whatever the turns to come.

        Every result when nothing masks (no output store, the policy disabled); otherwise the ones masking passes
        over for good: protected and non-text results, outputs of an excluded, protected or never-masked tool, and
        outputs no larger than their placeholder (with its digest). Recent and answered outputs are not: they
        become maskable as the session moves on. The Anthropic request's second cache mark goes past these
        (:func:`contextfold.billing.breakpoints.breakpoint_indices`). ``view`` None: the view's own messages (what
        ``normalized()`` gives, and a request that only adds messages after them), read with the pairs and counts
        the view keeps instead of pairing and counting it all again on every request (issue 22).
        """
        if view is None:
            messages: Sequence[Message] = self._view.normalized()
            pairs, counts = self._view.pairs(), self._view.counts()
        else:
            from ..pairing import pair_list

            messages, pairs, counts = view, pair_list(view), None
        results = [i for i, m in enumerate(messages) if m.role == "tool"]
        if self.cache is None or not self._policy.enabled:
            return frozenset(results)
        from ..cache.masking import _PLACEHOLDER_SHAPE  # the placeholder every masking writes, digest aside

        p = self._policy
        excluded = {*p.exclude_tools, *p.protected_tools}
        policies = self._steering.policies
        names = {pair.result_index: pair.name for pair in pairs if pair.result_index is not None}
        count = self._counter.count_message
        shapes: dict[str | None, int] = {}  # a placeholder's tokens depend on the result's name only
        out: set[int] = set()
        for i in results:
            m = messages[i]
            if m.kind == "masked":
                continue
            name = names.get(i) or m.name
            if m.name not in shapes:
                shapes[m.name] = count(m.with_content(_PLACEHOLDER_SHAPE))
            if (m.protected or not (isinstance(m.content, str) or all(part.type == "text" for part in m.content))
                    or name in excluded or (policies.configured and not policies.for_tool(name).maskable)
                    or (count(m) if counts is None else counts[i]) <= shapes[m.name] + p.mask_digest_tokens):
                out.add(i)
        return frozenset(out)

    def _apply(self, view: list[Message], result: Any) -> None:
        changes = {i: result.messages[i] for i in result.changed_indices}
        for i in result.masked_indices:
            changes[i] = keep_layout(view[i], changes[i])
        first = min(result.masked_indices)
        tool_call_id = changes[first].tool_call_id
        call = next((j for j in range(first - 1, -1, -1) if view[j].role == "assistant"
                     and any(c.id == tool_call_id for c in view[j].tool_calls)), first)
        self._bridge = (self._economics.calls, changes.get(call - 1, view[call - 1])) if call > 0 else None
        # Only these messages changed: the view keeps its normalized, counted prefix and its encodings before them.
        self._view.rewrite(changes)
        self.count += 1
        self._steering.note_masked(len(result.masked_indices), result.tokens_freed)
        # (Built stamped: no throwaway event and copy on a masking turn, issue 22.)
        self._tracer.emit_new(_events.CacheMasked, count=len(result.masked_indices),
                              refs=tuple(str(result.messages[i].meta.get("ref", "")) for i in result.masked_indices),
                              tokens_freed=result.tokens_freed,
                              prefix_tokens_invalidated=result.prefix_tokens_invalidated)


def keep_layout(original: Message, view: Message) -> Message:
    """``view`` remembering the part layout of ``original`` (see :func:`contextfold.archive.with_layout`).

    The archive is imported only for multi-part messages: most turns never need it.
    """
    if view is original or isinstance(original.content, str):
        return view
    from ..archive import with_layout

    return with_layout(original, view)
