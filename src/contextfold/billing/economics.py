"""Whether a rewrite of the history pays for the prompt cache it invalidates: :func:`weigh_rewrite`.

Masking old outputs or summarizing the oldest part frees tokens that every later call would have read from the
provider's cache; it also changes the history from its first changed message on, so that call pays for everything
after it again: fresh at OpenAI (the cached prefix ends there), written at 1.25x at Anthropic (the client's
breakpoints find no entry past the pinned head). So, in units of one fresh input token, with ``r`` the cache-read
ratio and ``w`` the price of a token that is not read (1 fresh, or Anthropic's write ratio)::

    cost now     = (w - r) * invalidated - w * freed      (invalidated: the view's tokens past the reusable head)
    saving later = r * freed * horizon                    (horizon: turns the freed tokens would have been read)

and the rewrite pays when the saving is at least the cost. The horizon is the turns until the view would reach the
hard threshold anyway (where a rewrite is forced and frees these tokens too), at most the turns the session has had
so far (a session is expected to last about as long again as it has: short sessions rarely recover a rewrite).
Without caching (``scheme == "none"``) every rewrite pays at once: it only saves.

**A rewrite that replaces a forced one.** When the view is expected to reach the hard threshold within the
session's expected remaining turns, waiting does not avoid a rewrite: the hard threshold forces one then, over a
larger view. If the rewrite now frees enough that the view then stays under hard for all the expected remaining
turns, it takes that forced rewrite's place (one rewrite either way), so it costs nothing the wait would not: it
pays, and saves reading the freed tokens until then plus the larger invalidation of the later rewrite. This is why
one deep rewrite (all the outputs masking may take, not just enough to get under soft) can pay where a shallow one
does not: the following calls append for long, instead of a shallow batch now and a forced rewrite later.

**A cache the provider has dropped.** An entry lives ``rates.lifetime_s`` after its last use (5 minutes at
Anthropic and, at least, at OpenAI). When the session has been idle longer than that (``idle_s``: a user who went
away, a tool that ran for minutes), the next call pays for the whole view anyway, so a rewrite invalidates nothing:
it pays whatever the horizon, and a change that waited for the cache to pay is best made then.
"""

from __future__ import annotations

from dataclasses import dataclass

from .rates import CacheRates

__all__ = ["RewriteCase", "RewriteVerdict", "reusable_head", "weigh_rewrite"]


@dataclass(frozen=True, slots=True)
class RewriteCase:
    """A rewrite the policy considers, in tokens of the view.

    Attributes:
        tokens: The view now, before the rewrite.
        freed: Tokens the rewrite removes from the view.
        reusable: Tokens at the start of the view the provider still reads from its cache after the rewrite
            (:func:`reusable_head`).
        growth_per_turn: Tokens the view gains per call on average (new messages after write-time truncation).
        turns_so_far: Calls the session has made.
        hard: The hard threshold, where a rewrite happens whatever it costs.
        idle_s: Seconds since the previous call used the cache (0: unknown or none).
    """

    tokens: int
    freed: int
    reusable: int
    growth_per_turn: float
    turns_so_far: int
    hard: int
    idle_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RewriteVerdict:
    """The decision and its figures (units of one fresh input token)."""

    act: bool
    expected_saving: float
    invalidation_cost: float
    horizon_turns: float
    invalidated_tokens: int
    replaces_forced: bool = False
    expired: bool = False  # the provider had dropped the cache: nothing to invalidate
    idle_s: float = 0.0
    lifetime_s: float = 0.0

    @property
    def net(self) -> float:
        """The expected saving less the invalidation cost (a rewrite that replaces a forced one costs nothing)."""
        return self.expected_saving - (0.0 if self.replaces_forced else self.invalidation_cost)

    def reason(self) -> str:
        """One sentence with the figures, for the decision event."""
        verb = "pays" if self.act else "waits"
        text = (f"rewrite {verb}: saves {self.expected_saving:,.0f} over {self.horizon_turns:.1f} turns against "
                f"{self.invalidation_cost:,.0f} for the {self.invalidated_tokens:,} cached tokens it invalidates")
        if self.replaces_forced:
            text += ("; it takes the place of the rewrite the hard threshold forces in "
                     f"{self.horizon_turns:.1f} turns, and the view then stays under hard for the expected turns")
        if self.expired:
            text += (f"; the cache expired (idle {self.idle_s:.0f} s, lifetime {self.lifetime_s:.0f} s): the next "
                     "call pays for the whole view anyway")
        return text


def reusable_head(rates: CacheRates, *, change_at: int, pinned: int, parts_after: int | None = None) -> int:
    """Tokens before a rewrite the provider still serves from its cache.

    ``change_at``: tokens of the view before the first message the rewrite changes; ``pinned``: tokens of the pinned
    head (system prompt, tools), where the modelled Anthropic client puts its first breakpoint. OpenAI reads any
    prefix; Anthropic only an entry a breakpoint made, which for a change deep in the history is the pinned head.
    ``parts_after``: content blocks from the change to the end of the view, when known: a change within Anthropic's
    lookback of the last breakpoint still finds the entry an earlier request made there (about ``change_at``).
    Prefixes under the model's minimum are never cached.
    """
    if rates.scheme == "none":
        return 0
    within_lookback = parts_after is not None and parts_after <= rates.lookback_blocks
    head = change_at if rates.scheme == "automatic" or within_lookback else min(pinned, change_at)
    return head if head >= rates.min_cacheable_tokens else 0


def weigh_rewrite(rates: CacheRates, case: RewriteCase) -> RewriteVerdict:
    """Whether ``case`` pays for the cache it invalidates within the turns it can save anything (see the module)."""
    read = rates.read_ratio
    unread = rates.write_ratio if rates.scheme == "breakpoints" else 1.0
    expired = rates.scheme != "none" and case.idle_s > rates.lifetime_s
    invalidated = 0 if expired else max(0, case.tokens - case.reusable)
    cost = (unread - read) * invalidated - unread * case.freed if rates.scheme != "none" else -float(case.freed)
    room = case.hard - case.tokens
    growth = case.growth_per_turn
    until_hard = room / growth if growth > 0 else float("inf")
    expected = float(max(case.turns_so_far, 1))
    horizon = max(0.0, min(expected, until_hard))
    saving = read * case.freed * horizon if rates.scheme != "none" else 0.0
    replaces = (rates.scheme != "none" and until_hard < expected
                and (room + case.freed) / growth >= expected)
    if replaces:
        # The forced rewrite at hard would invalidate the view's growth until then too: that much more is saved.
        saving += (unread - read) * max(0, room)
    return RewriteVerdict(saving >= cost or replaces, round(saving, 1), round(cost, 1), round(horizon, 2),
                          invalidated, replaces, expired, case.idle_s if expired else 0.0,
                          rates.lifetime_s if expired else 0.0)
