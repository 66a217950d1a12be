"""The manager's prompt-cache economics: whether a rewrite of the history pays for the cache it invalidates.

Masking batches and soft compactions rewrite the history from their first changed message on; a wider answered
output is narrowed again the next turn, which rewrites from there. Each is weighed with
:func:`contextfold.billing.economics.weigh_rewrite` at the prices of the model the session pays for
(``policy.cache_pricing``, or the manager's model): it happens when what it saves over the turns it can save
anything pays for the cached tokens it invalidates; otherwise it waits, up to the hard threshold, which acts
whatever the cost. Every verdict is a ``compact.cache_decision`` event with its figures.

Each call notes when it happened (the manager's clock, else a monotonic one): a call after an idle gap longer than
the provider's cache lifetime finds the cache dropped, so a rewrite then invalidates nothing and pays. The lifetime
(and Anthropic's write price) is the cache the session writes: ``policy.prompt_cache_ttl`` ("5m", "1h"; None: 5
minutes) until a recorded usage report's cache writes say which, and from then on the latest call that wrote.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from .._lazy import LazyModule

if TYPE_CHECKING:
    from datetime import datetime

    from ..billing import economics as _economics
    from ..billing.economics import RewriteVerdict
    from ..billing.rates import CacheRates, Ttl
    from ..compaction import Policy
    from ..messages import Message
    from ..telemetry import Tracer
    from ..telemetry import events as _events
    from ..tokens import MessageCounter, ModelInfo
    from ._view import View
else:  # (weighed on every masking turn: imported when first used, not with the manager, then no import per turn)
    _economics = LazyModule("..billing.economics", __package__)
    _events = LazyModule("..telemetry.events", __package__)

__all__ = ["CacheEconomics"]


class CacheEconomics:
    """Weighs rewrites for one session; tracks what the verdicts need (growth per call, calls, the last request)."""

    def __init__(self, *, policy: Callable[[], Policy], model: ModelInfo, counter: MessageCounter, tracer: Tracer,
                 session_id: str, clock: Callable[[], datetime] | None = None) -> None:
        # The policy in force, read at each decision as the thresholds are: one set on the manager later (a new
        # prompt_cache_ttl, cache_pricing, cache_aware) prices and gates the next verdict.
        self._policy = policy
        self._model = model
        self._counter = counter
        self._tracer = tracer
        self._session_id = session_id
        self._rates: CacheRates | None = None
        self._rates_policy: Policy | None = None  # the policy the rates were looked up for (a policy is frozen)
        # Anthropic's cache the session's rewrites land in: as the latest call that wrote says (note_usage), the
        # policy's prompt_cache_ttl before any did (a caller who never records usage has only that to say it).
        self._written_ttl: Ttl | None = None
        self.added_tokens = 0  # tokens of the messages added (after write-time truncation)
        self._uncounted: list[Message] = []  # messages added while counts were byte bounds, to count exactly
        self.calls = 0
        self.previous_transient = False  # the last view prepared carried a message the next one changes back
        self.waited = False  # the last rewrite weighed waits for the cache to pay
        self._clock = clock
        self._called_at: float | None = None  # when the last call was prepared (seconds, the clock's)
        self.idle_s = 0.0  # seconds between the last two calls: the cache's idle time when this call is sent

    def called(self, calls: int) -> None:
        """A model call is being prepared (the ``calls``-th): note how long the cache has sat idle since the last."""
        now = self._clock().timestamp() if self._clock is not None else time.monotonic()
        self.idle_s = max(0.0, now - self._called_at) if self._called_at is not None else 0.0
        self._called_at = now
        self.calls = calls

    @property
    def enabled(self) -> bool:
        """Whether rewrites are weighed at all (``policy.cache_aware`` and ``policy.enabled``)."""
        policy = self._policy()
        return policy.cache_aware and policy.enabled

    @property
    def rates(self) -> CacheRates:
        """The prompt-cache scheme and prices decisions use (looked up when first needed, and for a new policy)."""
        policy = self._policy()
        if self._rates is None or self._rates_policy is not policy:
            from ..billing.rates import cache_rates
            from ..errors import UnknownModel
            from ..tokens import get_model

            model: str | ModelInfo = self._model
            if policy.cache_pricing is not None:
                try:
                    model = get_model(policy.cache_pricing)
                except UnknownModel:
                    model = self._model  # config validation names unknown models; never fail a turn over prices
            self._rates = cache_rates(model, ttl=self._written_ttl or policy.prompt_cache_ttl or "5m")
            self._rates_policy = policy
        return self._rates

    def note_usage(self, usage: Any) -> None:
        """A call's usage report: the cache its writes went to prices later rewrites (Anthropic's 1-hour or 5-minute).

        The 5-minute cache is dropped after 300 s idle and the 1-hour one is not: priced at the 5-minute cache, a
        pause of a few minutes made a waiting rewrite look free while it wrote the whole view again at 2x. Anthropic
        puts 1-hour breakpoints before 5-minute ones, so a call that wrote both (tools and system at 1h, the
        conversation at 5m) has the part rewrites change in the 5-minute cache: 1h only when the latest call that
        wrote anything wrote none at 5m; a call that only read leaves the choice as it is.
        """
        creation = _part(_part(usage, "usage") or usage, "cache_creation")
        one_hour = _count(_part(creation, "ephemeral_1h_input_tokens"))
        five_minutes = _count(_part(creation, "ephemeral_5m_input_tokens"))
        if one_hour == 0 and five_minutes == 0:
            return  # read only (or no split reported): says nothing about the cache the session writes
        ttl: Ttl = "1h" if five_minutes == 0 else "5m"
        if ttl != self._written_ttl:
            self._written_ttl = ttl
            self._rates = None

    def note_added(self, messages: Sequence[Message], tokens: int) -> None:
        """``messages`` were added to the view, ``tokens`` by the manager's counter (after write-time truncation).

        While the counter counts byte upper bounds (the tokenizer loading) they are kept and counted exactly before
        a verdict reads the growth: a process's first session's verdicts would otherwise depend on when the
        tokenizer finished loading.
        """
        if self._counter.provisional:
            self._uncounted.extend(messages)
            return
        self._count_uncounted()
        self.added_tokens += tokens

    def added_mark(self) -> tuple[int, list[Message], int]:
        """What :meth:`note_added` changes, as it is now: given to :meth:`take_back_added` when that add is undone."""
        return self.added_tokens, self._uncounted, len(self._uncounted)

    def take_back_added(self, mark: tuple[int, list[Message], int]) -> None:
        """Undo the :meth:`note_added` calls since ``mark`` (:meth:`added_mark`): an add() that raised."""
        self.added_tokens, self._uncounted, uncounted = mark
        del self._uncounted[uncounted:]  # (the list note_added extended, or left whole when it counted it)

    def _count_uncounted(self) -> None:
        if self._uncounted:
            self._counter.wait_exact()
            self.added_tokens += sum(self._counter.count_each(self._uncounted))
            self._uncounted = []

    @property
    def growth_per_turn(self) -> float:
        """Tokens the view gains per call on average so far."""
        self._count_uncounted()
        return self.added_tokens / max(self.calls, 1)

    def weigh(self, view: Sequence[Message], *, action: str, change_at_index: int, freed: int, tokens: int,
              pinned: int, hard: int, head_tokens: int | None = None) -> RewriteVerdict:
        """The verdict on a rewrite of ``view`` from message ``change_at_index`` on, freeing ``freed`` tokens.

        ``head_tokens``: the tokens of ``view[:change_at_index]``, when the caller knows them (counted otherwise).
        """
        change_at = (sum(self._counter.count_message(m) for m in view[:change_at_index]) if head_tokens is None
                     else head_tokens)
        return self._weigh_at(change_at, None, action=action, freed=freed, tokens=tokens, pinned=pinned, hard=hard)

    def assess(self, *, change_at: int, freed: int, tokens: int, pinned: int, hard: int,
               parts_after: int | None = None) -> RewriteVerdict:
        """The verdict on a rewrite from ``change_at`` tokens on, without recording it (:meth:`record` does)."""
        rates = self.rates
        reusable = _economics.reusable_head(rates, change_at=change_at, pinned=pinned, parts_after=parts_after)
        case = _economics.RewriteCase(tokens=tokens, freed=freed, reusable=reusable,
                                      growth_per_turn=self.growth_per_turn, turns_so_far=self.calls, hard=hard,
                                      idle_s=self.idle_s)
        return _economics.weigh_rewrite(rates, case)

    def record(self, action: str, verdict: RewriteVerdict, *, tokens: int, freed: int) -> RewriteVerdict:
        """The decision taken on ``verdict``: remembered (``waited``) and sent as a ``compact.cache_decision``."""
        self.waited = not verdict.act
        self._emit(action, verdict, tokens=tokens, freed=freed, applied=verdict.act, forced=False)
        return verdict

    def _weigh_at(self, change_at: int, parts_after: int | None, *, action: str, freed: int, tokens: int,
                  pinned: int, hard: int) -> RewriteVerdict:
        verdict = self.assess(change_at=change_at, freed=freed, tokens=tokens, pinned=pinned, hard=hard,
                              parts_after=parts_after)
        return self.record(action, verdict, tokens=tokens, freed=freed)

    def keeps_wide(self, view: Sequence[Message], index: int, wide: Message, standard: Message, *, tokens: int,
                   pinned: int, hard: int) -> bool:
        """Whether the answered output shown wider at ``view[index]`` stays wider now that the agent moved on.

        Putting it back is a rewrite like the others: from that message on, the next request is paid again (fresh
        at OpenAI, written at Anthropic), and it saves reading the difference in every later call until the hard
        threshold. Right after the call, a small output put back at OpenAI's prices pays at once; at Anthropic's,
        re-writing the standard view at 1.25x costs more than reading the wider one at 0.1x for ten or so calls,
        and a view near the hard threshold has fewer than that left (lm32b @ 16K: 125 put-backs were ~0.1 of the
        unmanaged history's bill). A kept output is part of the history from then on; a later rewrite masks or
        summarizes it like any other.
        """
        if not self.enabled or self.rates.scheme == "none":
            return False
        freed = self._counter.count_message(wide) - self._counter.count_message(standard)
        if freed <= 0:
            return False
        after = view[index:]
        change_at = max(0, tokens - sum(self._counter.count_message(m) for m in after))
        parts = sum(max(1, (len(m.content) if isinstance(m.content, tuple) else int(bool(m.content)))
                        + len(m.tool_calls)) for m in after)
        waited = self.waited
        verdict = self._weigh_at(change_at, parts, action="narrow", freed=freed, tokens=tokens, pinned=pinned,
                                 hard=hard)
        self.waited = waited  # a put-back weighed is not a compaction waiting
        return not verdict.act

    def forced(self, action: str, *, tokens: int, freed: int) -> None:
        """Record a rewrite the hard threshold (or the message cap) forces, whatever it costs."""
        from ..billing.economics import RewriteVerdict

        verdict = RewriteVerdict(True, 0.0, 0.0, 0.0, 0)
        self._emit(action, verdict, tokens=tokens, freed=freed, applied=True, forced=True,
                   reason=f"{action}: the view is over the hard threshold, which acts whatever the cache costs")

    @property
    def aims_low(self) -> bool:
        """Whether a forced compaction should land at the soft threshold rather than halfway to hard.

        With a write premium (breakpoint caching) a rewrite costs what it keeps: landing lower makes each cycle
        between two rewrites longer and its rewrite cheaper. Without one (OpenAI) the bill hardly cares, and the
        view keeps more.
        """
        return self.enabled and self.rates.scheme == "breakpoints"

    def joins_forced(self) -> bool:
        """Whether a soft compaction still due joins a masking the hard threshold forced, in the same call.

        The masking has paid for rewriting the history after its first masked output; a soft compaction left for
        later would pay that again a few calls on (the floor and the economics would hold it off until then).
        """
        return self.enabled and self.rates.scheme != "none"

    def may_widen(self, view: View, *, rewrote: bool = False) -> bool:
        """Whether the answered output may be shown wider in this call without a rewrite the next call pays for.

        A wider output goes back to its standard view in the next call. OpenAI still reads everything before it;
        Anthropic reads only an entry one of the client's breakpoints made, and the last one was on this call's
        wider output: the next call finds the entry of the call before, unless that one carried a wider output too,
        or this call rewrote the history (``rewrote``: the entry before no longer matches). So with breakpoint
        caching a wider output right after another one, or right after a masking or compaction, would make the
        next call write all the history after the pinned head again.
        """
        if not self.enabled or not (self.previous_transient or rewrote) or self.rates.scheme != "breakpoints":
            return True
        from ._answered_view import widenable

        start, tail = view.tail()
        if not any(widenable(m) for m in tail) or not any(widenable(tail[i - start]) for i in view.answered()
                                                           if i >= start):
            return False  # nothing to widen: nothing to say
        why = "this call rewrote the history" if rewrote else "the previous call showed a wider output too"
        self._emit("widen", None, tokens=0, freed=0, applied=False, forced=False,
                   reason=f"widen: {why}; with breakpoint caching a wider output now makes the next call write the "
                          "history after the pinned head again")
        return False

    def widen_limit(self, default: int, cap: int) -> int:
        """The most tokens a wider answered output may take at these prices (``default`` otherwise).

        With breakpoint caching a wider output is written at the write premium and read once, then its standard
        view is written again: the wider view costs 1.25x its size for one look. There it is held to
        ``WIDEN_FACTOR`` times the write-time cap, without the 8,000-token floor (lm32b @ 16K at Claude Sonnet 4's
        prices, no wider view / twice the cap / the floor: recall 98.30 / 98.51 / 98.66%, bill 0.67 / 0.78 / 0.83x
        the unmanaged history's).
        """
        if not self.enabled or self.rates.scheme != "breakpoints":
            return default
        from ._answered_view import WIDEN_FACTOR

        return min(default, WIDEN_FACTOR * cap)

    def _emit(self, action: str, verdict: RewriteVerdict | None, *, tokens: int, freed: int, applied: bool,
              forced: bool, reason: str | None = None) -> None:
        # The reason's text and the verdict's figures are made where the event is built, on the telemetry thread
        # when the sink has one: a masking turn decides and goes on (issue 22). All they read is frozen.
        self._tracer.emit_deferred(
            _events.CacheDecision, partial(_decision_fields, action, verdict, reason, self.rates), action=action,
            applied=applied, forced=forced, tokens=tokens, tokens_freed=freed)


def _decision_fields(action: str, verdict: RewriteVerdict | None, reason: str | None,
                     rates: CacheRates) -> dict[str, Any]:
    """The fields of a ``compact.cache_decision`` read from its verdict (none: zeros) and the prices weighed at."""
    if verdict is None:
        return {"pricing": rates.model, "ttl": rates.ttl or "", "reason": reason or action}
    return {"pricing": rates.model, "ttl": rates.ttl or "", "reason": reason or f"{action}: {verdict.reason()}",
            "invalidated_tokens": verdict.invalidated_tokens, "expected_saving": verdict.expected_saving,
            "invalidation_cost": verdict.invalidation_cost, "horizon_turns": verdict.horizon_turns,
            "replaces_forced": verdict.replaces_forced}


def _count(value: Any) -> int:
    """A usage report's token count; 0 for a missing or malformed one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _part(obj: Any, key: str) -> Any:
    """``obj[key]`` of a mapping or ``obj.key`` of an SDK object; None for anything else (a report is never fatal)."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)
