"""The compactor: computes a session's compactions and keeps what decides whether to try one.

A part the :class:`~contextfold.manager.ContextManager` holds. It takes the view as an argument and returns a
:class:`~contextfold.compaction.CompactionResult`; the manager alone holds the lock, applies results to its view,
archives and counts. The compactor owns the circuit breaker (failures in a row, the pause and its cool-down), the
stall guard (a compaction that could not bring the view under its trigger waits for growth) and the floor (the
view's size right after the last compaction, which a soft compaction must outgrow to pay off).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._lazy import LazyModule
from ..telemetry._pace import READ_AHEAD_SLICE_S, GilPacer

# Compaction modules are imported by the first compaction, not with the manager (issue 15: cold start).
if TYPE_CHECKING:
    from ..cache import ToolOutputCache
    from ..compaction import Budgets, CompactionPlan, CompactionResult, Policy
    from ..messages import Message
    from ..pairing import ToolPair
    from ..summarize import Summarizer
    from ..telemetry import Tracer
    from ..tokens import MessageCounter, TokenCounter
    from . import _digests_ahead
else:  # (the read-ahead's outputs, imported by the first job that reads one, then no import statement per job)
    _digests_ahead = LazyModule("._digests_ahead", __package__)

__all__ = ["Compactor", "compact_after_boundary", "masked_before_summarized", "protected_names", "warm_for_compaction",
           "with_tail"]

# The circuit breaker's clock (a module name, so tests can move time without sleeping).
_monotonic = time.monotonic

# An automatic soft compaction must save clear_at_least tokens, or a fifth of the view in small windows. A summary
# loses detail and misses the prompt cache; saving a tenth was not worth it (replays, issue 11: with a tenth, a
# SWE-agent session at 16K was summarized 7 times, 5 messages at a time, and its recall fell from 98.3% to 96.1%;
# with a fifth, all SWE-agent sessions at 16K compact 7 times instead of 36, tau-bench at 4K 133 instead of 169).
MIN_SAVING_DIVISOR = 5
# A compaction that left the view over a trigger runs again only once the view has grown by this share of the
# message cap (or by clear_at_least tokens): compacting the same view again would give the same result, every turn.
STALL_REGROWTH_SHARE = 0.1
# The answered results may take up to this fraction (1/N) of a compaction's budget before they are cut harder:
# the rest is for the pinned prompt, the user's requests and the summary.
ANSWERED_BUDGET_DIVISOR = 2
# Below this many tokens per answered result a re-cut view would be little more than its reading note (the view
# keeps about 200 tokens for notes): the results are then left to the compaction's last resort.
MIN_ANSWERED_SHARE_TOKENS = 320
# After this many compactions failing in a row, automatic compaction pauses (circuit breaker).
CIRCUIT_BREAKER_FAILURES = 3


def masked_before_summarized(m: Message, excluded: Collection[str] = ()) -> bool:
    """Whether automatic masking replaces ``m`` before any summary reads it: an output cut at write time (stored).

    Masking goes before summarizing and takes the oldest outputs first, by ref; a compaction then reads the
    placeholder, not the cut view. Reading such a view for a summary ahead of time was wasted work (issue 22: in
    the lm32b loop at 16K, 4 of the 135 cut views read ahead or at add() were ever summarized; 720K characters).
    An output of a tool in ``excluded`` (never masked) is read as any message.
    """
    return (m.role == "tool" and m.kind == "truncated" and not m.protected and isinstance(m.meta.get("ref"), str)
            and m.name not in excluded)


def warm_for_compaction(messages: Sequence[Message], extractive: bool, redactor: Any, archived: bool,
                        outputs: ToolOutputCache | None = None, digest_tokens: int = 0,
                        counter: TokenCounter | None = None, never_masked: Collection[str] | None = None,
                        digests: Sequence[tuple[Message, str]] | None = None,
                        unredacted: Sequence[Message] | None = None, digest_kind: str = "full") -> None:
    """Read ``messages`` as a compaction will, on a background thread: a compaction then finds the work done.

    - ``extractive``: the summarizer is the extractive one: read each message as its summary will (entities,
      requests, actions, outcomes; the messages ``add()`` read, past half the soft threshold, are found read);
    - ``redactor``: redact what the archived transcript and the summary will redact (learning the secrets found;
      each result is kept, so the compaction looks only for what is learned after);
    - ``archived``: serialize the messages the transcript will hold unchanged (lines are cached by message);
    - ``outputs``: the tool output cache when masked outputs keep digests: read each output's digest material;
      with ``digest_tokens`` and ``counter``, also build each output's digest as its masking will (the items'
      token counts and secret checks are remembered: the masking turn assembles the same digest from them);
    - ``never_masked``: masking is automatic, and these tools' outputs are never masked: the outputs masking will
      replace before any summary reads them are not read for the summary (:func:`masked_before_summarized`).
    - ``digests``: the outputs whose digest material to read, each with its call's arguments (the manager releases
      an output once a masking can take it soon, see :mod:`._read_ahead`); None: every output of ``messages``, with
      the arguments of the calls among ``messages``.
    - ``unredacted``: those of ``messages`` to redact (the others were, as they were added); None: all of them.
    - ``digest_kind``: ``policy.mask_digest`` (a light digest reads no ranked material ahead: see read_digests).

    The entities' token counts are not taken ahead: a summary counts only its best ranked few hundred (issue 22:
    counting every entity of every message was ~10% of the read-ahead, for names no summary would weigh).

    Paced: the agent's thread never waits long for the GIL.
    """
    pacer = GilPacer(READ_AHEAD_SLICE_S)  # (longer slices than the telemetry's: see there)
    if extractive:
        from ..summarize.digest import read_message

        for m in messages:
            if never_masked is None or not masked_before_summarized(m, never_masked):
                read_message(m)
            pacer.tick()
    if outputs is not None:
        if digests is None:
            # What stays in view beside each placeholder: the arguments of the output's call (read from this batch;
            # an output whose call came in an earlier batch is warmed without them).
            arguments = {c.id: c.arguments for m in messages for c in m.tool_calls} if digest_tokens else {}
            digests = [(m, arguments.get(m.tool_call_id or "", "")) for m in messages
                       if m.role == "tool" and not m.protected and isinstance(m.content, str)]
        _digests_ahead.read_digests(digests, outputs, redactor, digest_tokens, counter, pacer, digest_kind)
    if redactor is not None:
        redactor.redact_ahead(messages if unredacted is None else unredacted)
    if archived:
        from ..serialize import message_line

        for m in messages:
            if redactor is None or redactor.is_clean(m):  # (a redacted message is a new one, serialized then)
                message_line(m)
            pacer.tick()


class Compactor:
    """Computes compactions of a view; owns the circuit breaker, the stall guard and the floor.

    Args:
        policy, budgets, counter: The session's policy, thresholds and token counter.
        cache: The tool output cache (re-cuts answered results), or None.
        tracer: Where errors, warnings and the circuit breaker's opening go.
        session_id: Names the session in the events.
        clock: The summaries' clock (None: now).
    """

    def __init__(self, *, policy: Policy, budgets: Budgets, counter: MessageCounter, cache: ToolOutputCache | None,
                 tracer: Tracer, session_id: str, clock: Callable[[], datetime] | None) -> None:
        self.policy = policy
        self.budgets = budgets
        self.counter = counter
        self.cache = cache
        self.tracer = tracer
        self.session_id = session_id
        self.clock = clock
        self.failed = 0  # compactions that failed in a row (a success resets it)
        self.floor: int | None = None  # tokens of the view right after the last compaction
        self.stalled: tuple[int, int, int] | None = None  # (tokens, messages, rank): a compaction that did not help
        self._paused_at: float | None = None
        # The last view target() split at its provider boundary, and the split: run() on that same list does not
        # look for the boundary again (a pass over the whole view, issue 22).
        self._split: tuple[list[Message], int, list[Message], list[Message]] | None = None

    # -- the circuit breaker ------------------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        """Automatic compaction stops after repeated failures.

        It half-opens after ``policy.circuit_cooldown_s``: the next compaction is tried, a success closes it, one more
        failure opens it again for another cool-down.
        """
        if self._paused_at is None:
            return False
        if _monotonic() - self._paused_at < self.policy.circuit_cooldown_s:
            return True
        if self.failed == 0:
            self._paused_at = None  # the half-open attempt succeeded: closed
        return False

    @paused.setter
    def paused(self, value: bool) -> None:
        self._paused_at = _monotonic() if value else None

    def failed_with(self, exc: Exception) -> None:
        """Count a failed compaction (a ``compact.error``); the third in a row opens the circuit breaker."""
        from ..telemetry import CompactError, RecoveryCircuitOpen

        self.failed += 1
        self.tracer.emit(CompactError(session_id=self.session_id, error_type=type(exc).__name__,
                                      message=str(exc), fallback="none"))
        if self.failed >= CIRCUIT_BREAKER_FAILURES and not self.paused:
            self.paused = True
            self.tracer.emit(RecoveryCircuitOpen(
                session_id=self.session_id, failures=self.failed,
                reason=f"{self.failed} compactions failed in a row; automatic compaction paused"))

    # -- computing a compaction ---------------------------------------------------------------------------------
    def target(self, view: list[Message], kind: str, tool_tokens: int, *, low: bool = False,
               counted: tuple[Sequence[int], Sequence[ToolPair]] | None = None,
               checked: bool = False) -> tuple[int, CompactionPlan | None]:
        """Tokens a compaction aims for: halfway between soft and hard when that loses nothing more, else the headroom.

        Landing just under hard would compact again on the next turn (thrash, and a prompt-cache miss each time).
        A dry run decides: when the midpoint costs keep counts or user messages, the compaction aims
        :meth:`headroom` under hard instead (only pinned text too large for that target lets it land at hard).
        Returns the budget, and the dry run of that budget (the compaction then does not plan again).
        ``low`` tries the soft threshold first: with a write premium on the prompt cache (Anthropic) each rewrite
        costs what it keeps, so landing lower makes every cycle both longer and cheaper (``CacheEconomics``).
        ``counted``: each message's tokens and ``pair_list(view)``, kept by the manager's view (not made again).
        ``checked``: every message of ``view`` passed ``check_messages`` (the view's :attr:`View.checked`).
        """
        from ..compaction import plan_compaction
        from ..errors import ContextfoldError, InsufficientBudget
        from ..provider_context import split_at_boundary

        hard = self.budgets.hard - tool_tokens
        if hard <= 0:
            # Tool schemas (and request extras) larger than a provider's real limit, learned far below the window:
            # no compaction can help, and a budget <= 0 reached plan_compaction as a ConfigError about no setting.
            raise InsufficientBudget(
                f"the tool schemas and request extras take {tool_tokens:,} tokens, more than the hard budget of "
                f"{self.budgets.hard:,} that the context limit ({self.budgets.window:,} tokens) leaves: no "
                "conversation fits beside them; send fewer or shorter tools, or use a model with a larger window",
                needed=tool_tokens, budget=self.budgets.hard)
        if kind == "soft":
            return hard, None
        halfway = (self.budgets.soft + self.budgets.hard) // 2 - tool_tokens
        head, rest = split_at_boundary(view)  # the dry run is of what the compaction will see (compact_after_boundary)
        self._split = (view, len(view), head, rest)
        head_tokens = sum(self.counter.count_message(m) for m in head)
        if head:
            counted = None  # (of the whole view; the dry run is of what follows the boundary)
        for target in ((self.budgets.soft - tool_tokens, halfway) if low else (halfway,)):
            try:
                plan = plan_compaction(rest, policy=self.policy, counter=self.counter, budget=target - head_tokens,
                                       kind=kind, counted=counted, prechecked=checked)
            except ContextfoldError:
                if target == halfway:
                    return hard, None
                continue  # the soft target is out of reach: the midpoint may still do
            if not plan.warnings:
                return target, plan
        # The midpoint costs keep counts: land at least the headroom under hard anyway. Landing just under hard
        # saved a few hundred tokens per compaction, and the next turn compacted (and archived the view) again.
        # Never at the cost of the answered message, though: that is the last resort of a budget nothing else fits.
        below = hard - self.headroom()
        try:
            plan = plan_compaction(view, policy=self.policy, counter=self.counter, budget=below, kind=kind,
                                   counted=counted, prechecked=checked)
        except ContextfoldError:
            return hard, None
        keep = plan.layout.keep
        return (below, plan) if keep is None or keep.answered else (hard, None)

    def headroom(self) -> int:
        """Tokens a hard compaction leaves under hard at least: ``clear_at_least``, or half of hard − soft if less.

        The view must grow by that much before the next compaction (half of hard − soft keeps small windows' target
        between soft and hard, where the midpoint is).
        """
        return min(self.policy.clear_at_least, (self.budgets.hard - self.budgets.soft) // 2)

    def shrink_answered(self, view: list[Message], budget: int,
                        answered: Sequence[int] | None = None) -> list[Message]:
        """``view`` with the answered results cut harder when together they take over half of ``budget``.

        Compaction keeps the answered unit whole unless nothing else fits; a unit bigger than the budget (26 search
        results the model is about to read) would then leave the view altogether, replaced by a summary of a few
        dozen tokens. Cutting each result to an equal share keeps real content of every one, each readable in full
        by its ref. The answered user request is cut the same way (head, tail and the ref of the whole text): a
        42 KB paste at 8K used to leave the view without a word, and the model answered a summary. A message of a
        role the policy never prunes is not cut. Without a tool
        output cache, or when the shares would be stubs, ``view`` itself comes back. ``answered``:
        ``answered_indices(view)``, when the caller keeps it (the manager's view does: not paired again).
        """
        from ..answered import answered_indices
        from ..archive import with_layout

        if self.cache is None:
            return view
        pinned_roles = tuple(self.policy.roles_never_prune)
        found = answered_indices(view) if answered is None else answered
        results = [i for i in found if _cuttable(view[i], pinned_roles)]
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

    def run(self, view: list[Message], *, kind: str, budget: int, summarizer: Summarizer, compaction_count: int,
            instructions: str | None = None, plan: CompactionPlan | None = None) -> CompactionResult:
        """Compact ``view`` to ``budget`` (pure: the caller applies the result); a failure counts and re-raises."""
        from ..errors import ContextfoldError

        known, self._split = self._split, None
        split = known[2:] if known is not None and known[0] is view and known[1] == len(view) else None
        try:
            result = compact_after_boundary(view, policy=self.policy, counter=self.counter, summarizer=summarizer,
                                            budget=budget, kind=kind, compaction_count=compaction_count,
                                            instructions=instructions, clock=self.clock, plan=plan, split=split)
        except ContextfoldError as exc:  # InsufficientBudget included: it counts towards the circuit breaker
            self.failed_with(exc)
            raise
        self.failed = 0
        return result

    def worth_applying(self, result: CompactionResult) -> bool:
        """Whether an automatic soft compaction saved enough to pay for the prompt-cache miss it causes."""
        before = result.stats.tokens_before
        return result.stats.tokens_after <= before - self.min_saving(before)

    def declined_unsummarized(self, view: list[Message], budget: int, counted: tuple[Sequence[int],
                              Sequence[ToolPair]] | None = None) -> tuple[tuple[int, int] | None,
                                                                           CompactionPlan | None]:
        """Whether an automatic soft compaction of ``view`` is declined whatever its summary says, before summarizing.

        Returns ((tokens before, messages before), None) when what the compaction keeps of the view (its front, user
        block and kept messages, which stay as they are) already takes more than :meth:`worth_applying` allows
        after it, with a summary of no tokens at all: no summary can make it worth applying, so none is computed
        (issue 22: the plain turns' p99, 5-8 ms each for a summary then thrown away). Otherwise (None, the dry run
        of the compaction, which :meth:`run` takes instead of making it again). A view after a provider's
        compaction item, or one planning fails for, gets (None, None): the compaction runs (and fails) as before.
        """
        from ..compaction import plan_compaction
        from ..compaction._compact import _request_overhead
        from ..errors import ContextfoldError
        from ..provider_context import split_at_boundary

        head, _ = split_at_boundary(view)
        if head:
            return None, None
        try:
            plan = plan_compaction(view, policy=self.policy, counter=self.counter, budget=budget, kind="soft",
                                   counted=counted)
        except ContextfoldError:
            return None, None
        layout, tokens = plan.layout, plan.partition.tokens
        # (compact() counts the compacted view with count_messages: each message, then the request's overhead.)
        overhead = _request_overhead(self.counter) if plan.messages else 0
        before = sum(tokens) + overhead
        staying = sum(tokens[i] for i in (*layout.front, *layout.user_block, *layout.kept)) + overhead
        if staying > before - self.min_saving(before):
            return (before, len(plan.messages)), None
        return None, plan

    def min_saving(self, tokens: int) -> int:
        """Tokens a rewrite of a ``tokens``-token view must save to pay for its prompt-cache miss."""
        return min(self.policy.clear_at_least, tokens // MIN_SAVING_DIVISOR)

    # -- compactions that cannot help ---------------------------------------------------------------------------
    def note_stall(self, plan_after: Any, total: int, count: int, rank: int) -> None:
        """Remember a compaction (of strength ``rank``) that left the view over a trigger, and say why."""
        from ..telemetry import CompactWarning

        if plan_after is None:
            self.stalled = None
            return
        self.stalled = (total, count, rank)
        self.tracer.emit(CompactWarning(
            session_id=self.session_id, code="compaction_stalled",
            message=f"compaction left the view over a trigger ({plan_after.reason}); it will not run again until "
                    f"the view grows by {self.regrowth_messages()} messages or {self.policy.clear_at_least} "
                    "tokens"))

    def stall_holds(self, total: int, count: int, rank: int) -> bool:
        """Whether a compaction of strength ``rank`` would meet the view a compaction could not fix, unchanged.

        A stronger trigger than the stalled one (hard after a soft compaction stalled) always runs.
        """
        stalled = self.stalled
        if stalled is None or rank > stalled[2]:
            return False
        grew = count - stalled[1] >= self.regrowth_messages() or total - stalled[0] >= self.policy.clear_at_least
        if grew:
            self.stalled = None
        return not grew

    def regrowth_messages(self) -> int:
        """Messages the view must gain before a stalled compaction is tried again."""
        return max(1, int(self.policy.emergency_message_count * STALL_REGROWTH_SHARE))


def compact_after_boundary(view: Sequence[Message], *, policy: Policy, counter: MessageCounter,
                           summarizer: Summarizer, budget: int,
                           split: tuple[list[Message], list[Message]] | None = None,
                           **options: Any) -> CompactionResult:
    """:func:`~contextfold.compaction.compact` of what follows the latest provider compaction item.

    The standing prompt and the boundary (with its tool results) stay in front, untouched: no summary ever covers a
    provider's compaction item or what it stands for. ``budget`` is for the whole view; ``plan`` in ``options`` must
    be a dry run of the part after the boundary (as :meth:`Compactor.target` makes it). Without a boundary this is
    ``compact`` itself. ``split``: ``split_at_boundary(view)``, when the caller has it.
    """
    from dataclasses import replace

    from ..compaction import compact
    from ..errors import InsufficientBudget
    from ..provider_context import split_at_boundary

    head, rest = split_at_boundary(view) if split is None else split
    if not head:
        return compact(view, policy=policy, counter=counter, summarizer=summarizer, budget=budget, **options)
    head_tokens = sum(counter.count_message(m) for m in head)
    if budget - head_tokens <= 0:
        raise InsufficientBudget(
            f"the standing prompt and the provider's compaction item take {head_tokens:,} tokens, the whole "
            f"compaction budget of {budget:,}: nothing after them can fit", needed=head_tokens, budget=budget)
    result = compact(rest, policy=policy, counter=counter, summarizer=summarizer, budget=budget - head_tokens,
                     **options)
    stats = replace(result.stats, tokens_before=result.stats.tokens_before + head_tokens,
                    tokens_after=result.stats.tokens_after + head_tokens,
                    messages_before=result.stats.messages_before + len(head),
                    messages_after=result.stats.messages_after + len(head), budget=budget)
    return replace(result, messages=[*head, *result.messages], stats=stats)


def _cuttable(m: Message, pinned_roles: tuple[str, ...]) -> bool:
    """An answered message compaction may cut to a view: a tool result, or the user's own request.

    Not a protected message, and not one of a role the policy never prunes (``roles_never_prune=("user", ...)``):
    such a message stays as it is, and a compaction that cannot fit it says so (InsufficientBudget).
    """
    if m.protected or m.role in pinned_roles:
        return False
    return m.role == "tool" or (m.role == "user" and m.kind is None)


def with_tail(result: CompactionResult, tail: Sequence[Message]) -> CompactionResult:
    """``result`` with ``tail`` (messages added after the compacted view) appended to its messages."""
    from dataclasses import replace

    return replace(result, messages=[*result.messages, *tail])


def protected_names(view: Sequence[Message]) -> tuple[str, ...]:
    """``id`` (and ``label`` when set) of the pinned and protected messages of ``view``, for the trace."""
    names = []
    for m in view:
        if m.protected or m.role in ("system", "developer"):
            label = m.meta.get("label")
            names.append(f"{m.meta.get('id', '')}{f' ({label})' if label else ''}")
    return tuple(names)
