"""Context-overflow recovery: when the provider says the prompt is too long, shrink the view and retry.

:func:`call_with_recovery` prepares the view, calls the model, and on a context-length error (recognised by
:func:`~contextfold.recovery.parse_overflow`) corrects the estimate from the counts in the error, compacts the view
(``ContextManager.shrink_for_overflow``), falls back to dropping the oldest messages with their tool partners when
compaction is impossible or not enough, and retries. It stops with :class:`~contextfold.errors.RecoveryFailed`
after ``max_retries`` retries, when a retry would not be meaningfully smaller than the rejected prompt (the stall
guard), or when automatic compaction is off without ``allow_on_overflow``. Three failed compactions in a row open
the circuit breaker: automatic compaction pauses for the session (recovery then only drops old messages).

Each error first teaches the provider's limit (:func:`learned_ceiling`): the manager keeps it
(``ContextManager.learn_limit``, stored per model), its thresholds follow it, so the retry is strictly smaller than
the rejected request and later turns stay under the limit without another error.

Every step is an event: ``recovery.overflow``, ``recovery.limit_learned``, ``recovery.retry``,
``recovery.gave_up``, ``recovery.circuit_open``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConfigError, ContextfoldError, RecoveryFailed
from ..media.budget import MediaTally, request_bytes
from ..media.limits import MediaLimitInfo, MediaLimits, known_limits, parse_media_limit
from ..messages import Message
from ..pairing import normalize, remove_messages, tool_pairs
from ..telemetry import RecoveryCircuitOpen, RecoveryGaveUp, RecoveryMediaLimit, RecoveryOverflow, RecoveryRetry
from ..tokens import MessageCounter
from .overflow import OverflowInfo, parse_overflow

if TYPE_CHECKING:
    from ..compaction import Policy
    from ..manager import ContextManager

__all__ = [
    "CIRCUIT_BREAKER_FAILURES",
    "DEFAULT_MAX_RETRIES",
    "MIN_WINDOW_SHARE",
    "STALL_SHRINK_RATIO",
    "OverflowInfo",
    "OverflowRecovery",
    "acall_with_recovery",
    "call_with_recovery",
    "counted_tokens",
    "drop_oldest",
    "essential_tokens",
    "learned_ceiling",
    "media_ceiling",
    "parse_limit_error",
    "parse_overflow",
    "shared_ceiling",
]

T = TypeVar("T")

# Three retries: a compaction, a deeper one, and a drop of old turns. A prompt still too long after that is one
# huge message or a misconfigured window, and more calls would only spend money on the same error.
DEFAULT_MAX_RETRIES = 3
# A retry must be at least 5% smaller than the rejected prompt: less means nothing compactable is left (pinned,
# protected or recent messages fill the window) and the provider would reject the retry for the same reason.
STALL_SHRINK_RATIO = 0.05
# Three compactions failing in a row means the summarizer or the budget is broken, not the moment: stop trying
# automatically (the circuit breaker) instead of paying for a failing summary on every turn.
CIRCUIT_BREAKER_FAILURES = 3
# Without a limit in the error, each fallback drop removes a quarter of the prompt: enough to clear most overflows
# in one retry, little enough to keep the recent work.
DROP_SHARE_WITHOUT_LIMIT = 0.25
# Aim this far under the provider's limit: our count and the provider's differ by a few percent per message.
LIMIT_SAFETY_MARGIN = 0.05
# An error without the provider's limit teaches only that the rejected size was too much: the limit learned is this
# share below it, doubled for each further overflow of the same call (a provider far below what was sent is found in
# a few steps: 15%, 30%, 50% below), never more than half.
NO_LIMIT_SHARE = 0.15
NO_LIMIT_MAX_SHARE = 0.5
# The least share of the configured window's hard threshold a limit is inferred at from errors naming none, and the
# least a stated limit must leave to be shared with the model's other callers. An upstream answering "too long" to
# everything (a transient bug, a misbehaving gateway) shrank a session step by step to ~78 tokens (a figure of
# "5 tokens" did the same to every session of the model at once), and the manager then refused every later request
# itself. A limit so far under the configured window is kept by the session only, provisionally (it expires: see
# ``manager._limits``); an inferred one never goes under it, nor under what must stay (:func:`essential_tokens`).
MIN_WINDOW_SHARE = 1 / 16
# The most provider tokens per token of ours the limit shared with the model's other callers follows: the estimating
# counter's calibration bound (tokens.counting), past which usage figures are not the counted messages'. An error
# counting ten times our count of the request taught every session of the store a tenth of the model's limit.
SHARED_RATIO_MAX = 2.5
# No body limit in front of an LLM API is below nginx's default (1 MiB; cloud gateways take 6-32 MB): a refusal for
# size naming no limit, of a smaller request with media, is no limit of the path every caller shares (a gateway's
# quota, a lying server). Stored for the model, one caller's 8 KB screenshot refused so stripped every caller of the
# model of its images: the manager keeps such a limit to itself.
MIN_UNNAMED_BODY_LIMIT = 1024 * 1024
# Messages whose kind carries the compacted history: dropping them while keeping later turns is the worst trade.
_UNDROPPABLE_KINDS = frozenset({"summary", "retain"})


def parse_limit_error(error: object, *, provider: str | None = None) -> OverflowInfo | MediaLimitInfo | None:
    """What a provider's refusal of a request for its size says; None for any other error.

    Too many tokens (:func:`parse_overflow`), or too many bytes or images and documents
    (:func:`contextfold.media.parse_media_limit`). What :meth:`OverflowRecovery.shrink` takes: call sites that
    recover read errors with it, so a request refused for its screenshots is recovered like one refused for its
    tokens.
    """
    return parse_overflow(error, provider=provider) or parse_media_limit(error, provider=provider)


def call_with_recovery(
    cm: ContextManager,
    call: Callable[[Any], T],
    *,
    format: str = "openai_chat",
    max_retries: int = DEFAULT_MAX_RETRIES,
    reply_tokens: int = 0,
    cache_breakpoints: bool = False,
) -> T:
    """Call the model with the prepared view; on a context-length error, shrink the view and retry.

    >>> reply = call_with_recovery(cm, lambda view: client.chat.completions.create(  # doctest: +SKIP
    ...     model="gpt-4o", messages=view))

    Args:
        cm: The session's manager.
        call: Sends the view (``cm.prepare(format)``) to the model and returns the reply; raises the SDK's error.
        format: The wire format ``call`` takes.
        max_retries: Retries after the first call (so at most ``max_retries + 1`` calls).
        reply_tokens: What the request reserves for the reply when the provider counts it against the window
            (Anthropic's ``max_tokens``): a retry leaves room for it even when the error does not mention it.
        cache_breakpoints: Passed to ``cm.prepare`` (Anthropic: contextfold places the ``cache_control`` marks).

    Raises:
        RecoveryFailed: retries exhausted, the stall guard fired, or compaction is off (``Policy(auto=False)``
            without ``allow_on_overflow``); the provider's error is the cause.
        Exception: any error that is not a context-length error, unchanged.
    """
    recovery = OverflowRecovery(cm, max_retries, reply_tokens)
    view = cm.prepare(format, cache_breakpoints=cache_breakpoints)
    while True:
        try:
            return call(view)
        except Exception as exc:
            info = parse_limit_error(exc)
            if info is None:
                raise
            recovery.shrink(info, exc)
        view = cm.prepare(format, cache_breakpoints=cache_breakpoints)


async def acall_with_recovery(
    cm: ContextManager,
    call: Callable[[Any], Awaitable[T]],
    *,
    format: str = "openai_chat",
    max_retries: int = DEFAULT_MAX_RETRIES,
    reply_tokens: int = 0,
    cache_breakpoints: bool = False,
) -> T:
    """Async :func:`call_with_recovery`: ``call`` is a coroutine function; compaction runs on a worker thread."""
    recovery = OverflowRecovery(cm, max_retries, reply_tokens)
    view = await cm.aprepare(format, cache_breakpoints=cache_breakpoints)
    while True:
        try:
            return await call(view)
        except Exception as exc:
            info = parse_limit_error(exc)
            if info is None:
                raise
            await asyncio.to_thread(recovery.shrink, info, exc)
        view = await cm.aprepare(format, cache_breakpoints=cache_breakpoints)


class OverflowRecovery:
    """The state of one recovering call: how many overflows it has seen.

    Framework adapters use it where the framework owns the call: :meth:`shrink` after each overflow (it raises
    RecoveryFailed when the stall guard, the retry limit or a paused manager says not to retry), then send the
    manager's view again.
    """

    def __init__(self, cm: ContextManager, max_retries: int, reply_tokens: int) -> None:
        for name, value in (("max_retries", max_retries), ("reply_tokens", reply_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"must be a non-negative integer, got {value!r}", field=name)
        self.cm = cm
        self.max_retries = max_retries
        self.reply_tokens = reply_tokens
        self.attempt = 0

    def shrink(self, info: OverflowInfo | MediaLimitInfo, cause: BaseException) -> None:
        """Make the view smaller after ``info``; raises RecoveryFailed (from ``cause``) when it should not retry.

        ``info`` from :func:`parse_limit_error`: a context-length error compacts (and drops the oldest messages), a
        media error takes the oldest images and documents out (a request refused for its bytes that carries none is
        a context-length error).
        """
        if isinstance(info, MediaLimitInfo):
            if info.kind == "items" or self.cm.media().items:
                self._shrink_media(info, cause)
                return
            # Refused for its bytes without an image or document in it (a proxy's 413: nginx takes 1 MB by
            # default): its text is what is too large, recovered as a context overflow of unknown limit.
            info = OverflowInfo(info.message, info.provider, status_code=info.status_code)
        cm = self.cm
        self.attempt += 1
        cm.tracer.emit(RecoveryOverflow(session_id=cm.session_id, attempt=self.attempt, message=info.message,
                                        prompt_tokens=info.prompt_tokens, limit=info.limit, provider=info.provider))
        if _within_limit(info, self.reply_tokens):
            # The error's own figures say the request fits: whatever it is, a smaller view does not cure it, and a
            # limit learned from it (below a request it says fits) would stay with the session for good.
            self._give_up(f"the provider's error says the request is within its limit ({info.prompt_tokens} tokens "
                          f"and {max(info.max_tokens or 0, self.reply_tokens)} for the reply, limit {info.limit}): "
                          f"nothing for recovery to shrink ({_figures(info)})", cause)
        before = counted_tokens(cm)  # the rejected request, by our count
        # Provider tokens per token of ours: the error counted the very view we sent.
        ratio = info.prompt_tokens / before if info.prompt_tokens and before else 1.0
        # A count past what a tokenizer can be off (images, tool schemas or a gateway's prompt we do not count, or
        # a broken server's figure) still fits this request: the retry follows it (issue 17: the provider counting
        # 8-20x ours recovers in one retry). What it says is this request's, not the model's: shared, the limit over
        # the bounded factor went to every session of the model (41,344 tokens of gpt-4o's 128,000, for good).
        implausible = info.limit is not None and ratio > SHARED_RATIO_MAX
        # What the error teaches holds beyond this call: the thresholds follow it from now on, so the retry and
        # every later turn stay under it (and the answered output is never widened back over it).
        ceiling = learned_ceiling(info, before, ratio=ratio, reply_tokens=self.reply_tokens, attempt=self.attempt,
                                  policy=cm.policy)
        least = int(cm.configured_budgets.hard * MIN_WINDOW_SHARE)
        if info.limit is None:
            # Only "too long": the limit is inferred, never under what must stay nor a small share of the window.
            # Once the request is down there, another such answer is not one shrinking cures (bounded figureless
            # shrinks): nothing is learned, the provider's answer goes to the caller, and later calls ask again.
            essential = essential_tokens(cm)
            floor = max(essential, least)
            learns, strictly_smaller = True, int(before * (1 - STALL_SHRINK_RATIO))
            if ceiling < floor:
                learns = floor <= strictly_smaller
                if not learns and essential <= strictly_smaller:
                    self._give_up(f"the provider refused a request of {before:,} tokens as too long without saying "
                                  f"its limit, and recovery does not shrink a session under {floor:,} tokens on "
                                  f"such an answer (what must stay, the system and pinned messages, the tools and "
                                  f"the latest request: {essential:,}; 1/{round(1 / MIN_WINDOW_SHARE)} of the "
                                  f"configured window's threshold: {least:,}); if the provider's window really is "
                                  f"smaller, configure it (max_context_tokens) ({_figures(info)})", cause)
                ceiling = floor  # (what must stay fills the request: nothing learned, the stall guard says why)
            if learns:
                cm.learn_limit(ceiling, shared=0, provisional=True)
        elif implausible:
            # This session's only, provisionally (it expires), and never under what must stay (else nothing is
            # learned and the retry still goes under the stated figures: see the target below).
            if ceiling > 0 and ceiling >= essential_tokens(cm):
                cm.learn_limit(ceiling, provider_limit=info.limit, shared=0, provisional=True)
        elif ceiling >= least and not _far_under_stated_limit(info, before, self.reply_tokens):
            shared = shared_ceiling(info, before, ratio=ratio, attempt=self.attempt, policy=cm.policy)
            cm.learn_limit(ceiling, provider_limit=info.limit, shared=max(ceiling, shared) if shared else 0)
        elif ceiling > 0:
            # A stated limit is learned at once, but one so far under the configured window may be one odd answer's
            # (a gateway's bug, a client's text echoed unquoted, a count of the request thousands of times ours), and
            # so may a limit far over the request it refused: the session's only, provisionally, and never under
            # what must stay. What holds for every caller (the factor bounded) is shared as before.
            shared = shared_ceiling(info, before, ratio=ratio, attempt=self.attempt, policy=cm.policy)
            if shared >= least:
                cm.learn_limit(shared, provider_limit=info.limit, shared=shared)
            if ceiling >= essential_tokens(cm):
                cm.learn_limit(ceiling, provider_limit=info.limit, shared=0, provisional=True)
            # (else what must stay is over it: nothing is learned, the guards below give up naming the provider's
            # answer, and the next call asks the provider again rather than being refused here)
        if self.attempt > self.max_retries:
            self._give_up(f"the prompt is still too long after {self.max_retries} retries ({_figures(info)})", cause)
        extras = cm.request_extras_tokens
        hard = min(cm.budgets.hard, ceiling) if ceiling > 0 else cm.budgets.hard  # (a limit it did not learn, too)
        if ceiling > 0 and extras >= hard:
            # The tool schemas alone fill what the provider's real limit leaves (far below the window): compacting
            # the conversation cannot help, and the error must say what is too large.
            self._give_up(f"the tool schemas and request extras alone are too long: {extras:,} tokens, more than "
                          f"the {hard:,} the provider's limit leaves; send fewer or shorter tools "
                          f"({_figures(info)})", cause)
        if not cm.policy.may_compact_on_overflow:
            self._give_up("the provider reported a context overflow, but automatic compaction is off "
                          "(Policy(auto=False) or enabled=False); set Policy(allow_on_overflow=True) (and "
                          "enabled=True) to let recovery compact", cause)
        target = _target(info, ratio, self.reply_tokens)
        actions = [self._compact(info)]
        after = counted_tokens(cm)
        # A retry must fit the provider's limit when it gave one and the limit learned so far, and pass the stall
        # guard in any case.
        floor = min(int(before * (1 - STALL_SHRINK_RATIO)), cm.budgets.hard)
        enough = floor if target is None else min(target, floor)
        if after > enough:
            goal = min(enough, int(before * (1 - DROP_SHARE_WITHOUT_LIMIT))) if target is None else enough
            dropped = cm.rewrite_view(lambda view: drop_oldest(view, goal, cm.counter, cm.policy),
                                      reason="overflow_drop", shrinks=True)
            if dropped:
                actions.append(f"drop_oldest:{dropped}")
            after = counted_tokens(cm)
        action = "+".join(a for a in actions if a)
        if before - after < STALL_SHRINK_RATIO * before:
            self._give_up(f"stall guard: recovery could shrink the prompt only from {before} to {after} tokens "
                          f"(less than {STALL_SHRINK_RATIO:.0%}); what is left is pinned, protected or the latest "
                          f"request ({_figures(info)})", cause)
        cm.tracer.emit(RecoveryRetry(session_id=cm.session_id, attempt=self.attempt, action=action,
                                     tokens_before=before, tokens_after=after))

    def _shrink_media(self, info: MediaLimitInfo, cause: BaseException) -> None:
        """After a media error: learn the limit it teaches, take the oldest images and documents out, retry."""
        cm = self.cm
        self.attempt += 1
        media = cm.media()
        before = counted_tokens(cm)
        learned = media_ceiling(info, media, before, attempt=self.attempt)
        shared = _shared_media_ceiling(info, learned, media, before)
        if shared.known:
            cm.learn_media_limit(max_bytes=shared.max_bytes, max_items=shared.max_items)
        if shared != learned:  # (the rest is this session's: kept under it, read by no other caller)
            cm.learn_media_limit(max_bytes=learned.max_bytes, max_items=learned.max_items, shared=False)
        limits = cm.media_limits
        cm.tracer.emit(RecoveryMediaLimit(session_id=cm.session_id, attempt=self.attempt, measure=info.kind,
                                          message=info.message, limit=info.limit, sent=info.sent,
                                          max_bytes=limits.max_bytes, max_items=limits.max_items,
                                          provider=info.provider))
        said = f"{info.provider or 'the provider'} said: {info.message}"
        if self.attempt > self.max_retries:
            self._give_up(f"the request's media are still refused after {self.max_retries} retries ({said})", cause)
        evicted = cm.keep_media_within_limits()
        if not evicted:
            self._give_up(f"the provider refused the request's media ({media.items} images and documents, "
                          f"{media.bytes} bytes inline) and none is left that may go: the pinned and protected "
                          f"messages and the latest request keep theirs ({said})", cause)
        cm.tracer.emit(RecoveryRetry(session_id=cm.session_id, attempt=self.attempt, action=f"evict_media:{evicted}",
                                     tokens_before=before, tokens_after=counted_tokens(cm)))

    def _compact(self, info: OverflowInfo) -> str:
        """Compact through the manager; on failure count it toward the circuit breaker and ask for a drop."""
        cm = self.cm
        if cm.paused:
            return "compaction_paused"
        try:
            cm.shrink_for_overflow(info.prompt_tokens, info.limit)
        except RecoveryFailed:
            raise
        except ContextfoldError as exc:
            failures = cm.failed_compactions
            if failures >= CIRCUIT_BREAKER_FAILURES and not cm.paused:  # the manager opens it itself as a rule
                cm.paused = True
                cm.tracer.emit(RecoveryCircuitOpen(
                    session_id=cm.session_id, failures=failures,
                    reason=f"{failures} compactions failed in a row (last: {type(exc).__name__}: {exc}); automatic "
                           "compaction is paused for this session"))
            return f"compaction_failed:{type(exc).__name__}"
        return "compact"

    def _give_up(self, reason: str, cause: BaseException) -> None:
        cm = self.cm
        cm.tracer.emit(RecoveryGaveUp(session_id=cm.session_id, attempts=self.attempt, reason=reason))
        raise RecoveryFailed(reason) from cause


def learned_ceiling(info: OverflowInfo, rejected: int, *, ratio: float, reply_tokens: int, attempt: int,
                    policy: Policy) -> int:
    """The most tokens (ours, view and request extras) the provider takes, by what one overflow error says.

    With the provider's limit, the thresholds become those of a model registered with that window (its reply
    reserve kept), and never above the input the limit leaves beside the reply the request reserved. Without it,
    only the rejected size is known: the limit is :data:`NO_LIMIT_SHARE` below it, more for each further overflow of
    the same call. Either way it is below the rejected request by at least the stall guard's share, so a retry that
    keeps under it is strictly smaller than what was rejected.

    Args:
        info: The error.
        rejected: Our count of the rejected request.
        ratio: Provider tokens per token of ours (1.0 when unknown).
        reply_tokens: What the request reserved for the reply, when the provider counts it.
        attempt: The overflows of this call so far (1 for the first).
        policy: The session's policy (the reply reserve).
    """
    from ..errors import ConfigError

    strictly_smaller = int(rejected * (1 - STALL_SHRINK_RATIO))
    if info.limit is None:
        share = min(NO_LIMIT_MAX_SHARE, NO_LIMIT_SHARE * 2 ** (max(1, attempt) - 1))
        return min(int(rejected * (1 - share)), strictly_smaller)

    def ours(provider_tokens: int) -> int:
        # Whichever side of 1 the ratio is on, the limit must hold by both counts (grounded totals are the
        # provider's, ungrounded ones ours).
        return int(min(provider_tokens, provider_tokens / ratio) * (1 - LIMIT_SAFETY_MARGIN))

    window = ours(info.limit)
    input_limit = ours(max(0, info.limit - max(info.max_tokens or 0, reply_tokens)))
    try:
        hard = policy.budgets(window).hard if window > 0 else 0
    except ConfigError:  # a limit smaller than the reply reserve: the input limit alone says it
        hard = input_limit
    return min(hard, input_limit, strictly_smaller)


def shared_ceiling(info: OverflowInfo, rejected: int, *, ratio: float, attempt: int, policy: Policy) -> int:
    """The part of :func:`learned_ceiling` that holds for every caller of the model (what a shared store keeps).

    With the provider's limit: the thresholds of a model registered with that window (the policy's reply reserve),
    and below the rejected request only when its input alone was over them. This request's own ``max_tokens`` is
    left out: a caller asking for a reply of nearly the whole window is refused for its request, and must not leave
    every other caller of the store a few dozen tokens. Without the limit, 0: nothing holds for other callers. The
    error says only that this request was too long, for reasons that may be its own (its ``max_tokens``, its tools,
    a gateway's wording): shared, one caller's 40-token request refused so taught every caller of the model a limit
    of 34 tokens, for good.
    """
    from ..errors import ConfigError

    if info.limit is None:
        return 0
    # A count of the request beyond what a tokenizer can be off says the request carried what we did not count (a
    # gateway's own prompt, the caller's unpassed tools): that factor is this request's, not the model's.
    ratio = min(ratio, SHARED_RATIO_MAX)
    window = int(min(info.limit, info.limit / ratio) * (1 - LIMIT_SAFETY_MARGIN))
    try:
        hard = policy.budgets(window).hard if window > 0 else 0
    except ConfigError:  # a limit smaller than the reply reserve: nothing is shared beyond this request's figure
        return learned_ceiling(info, rejected, ratio=ratio, reply_tokens=0, attempt=attempt, policy=policy)
    if rejected > hard:
        return min(hard, int(rejected * (1 - STALL_SHRINK_RATIO)))
    return hard


def media_ceiling(info: MediaLimitInfo, media: MediaTally, text_tokens: int, *, attempt: int) -> MediaLimits:
    """The media limit (our count) one media error teaches, strictly below the rejected request in its measure.

    Items: the provider's limit scaled by our count over its own (a document is one item to us and its pages to
    Anthropic), and at least one fewer than we sent. Bytes: the limit the error names, else the provider's
    published one, and in any case a share below our bound on the rejected request's bytes (:data:`NO_LIMIT_SHARE`,
    doubled for each further error of the same call): the provider never says how big it found the request.
    """
    if info.kind == "items":
        ours = media.items
        limit = info.limit if info.limit is not None else ours
        if info.sent and ours:
            limit = limit * ours // max(info.sent, 1)
        return MediaLimits(max_items=max(1, min(limit, ours - 1)))
    rejected = request_bytes(media, text_tokens)
    share = min(NO_LIMIT_MAX_SHARE, NO_LIMIT_SHARE * 2 ** (max(1, attempt) - 1))
    below = int(rejected * (1 - share))
    named = _named_bytes(info, text_tokens)
    if named is None:
        named = known_limits(info.provider).max_bytes
    return MediaLimits(max_bytes=max(1, below if named is None else min(named, below)))


def _named_bytes(info: MediaLimitInfo, text_tokens: int) -> int | None:
    """The byte limit a media error names, when it is one a request can meet by sending fewer media."""
    named = info.limit
    if named is not None and named <= request_bytes(MediaTally(), text_tokens):
        # A figure the request's text alone is over ("max 0 MB"): no eviction of media can meet it, and learned it
        # would be stored for the model and strip every later session of its images. Not a limit to learn.
        return None
    return named


def _shared_media_ceiling(info: MediaLimitInfo, learned: MediaLimits, media: MediaTally,
                          text_tokens: int) -> MediaLimits:
    """The part of ``learned`` (:func:`media_ceiling`) that holds for every caller of the model (what is stored).

    Of items, the figure the error names, as named, when the request was over it (by our count or the error's own):
    "one fewer than this request had" (an error whose figure is unreadable) and the figure scaled by this request's
    pages per item of ours (a caller's 300-page documents) are this request's; stored for the model, one caller's
    refusal left every caller one image a request, and so did a figure the request was within (a client's own text
    echoed in an error unquoted, reviewer 2 of s17: "Max is 1" of a request with one image). A byte limit
    learned from a request of at least :data:`MIN_UNNAMED_BODY_LIMIT` holds for every caller. Of a smaller request,
    only the figure the error names: a share under the refused request may be this request's alone (a gateway's
    quota, a lying server), and so may a figure the request was under ("exceeds 20 MB" of 26 KB), or a published one
    that says nothing of why it was refused (Anthropic's 32 MB beside a 24 KB request). Stored for the model, it
    stripped every other caller of the model of its images.
    """
    if info.kind == "items":
        named = info.limit
        exceeded = named is not None and 0 < named < max(media.items, info.sent or 0)
        return MediaLimits(max_items=named) if exceeded else MediaLimits()
    if request_bytes(media, text_tokens) >= MIN_UNNAMED_BODY_LIMIT:
        return learned
    named = _named_bytes(info, text_tokens)
    return MediaLimits(max_bytes=named) if named is not None else MediaLimits()


def _within_limit(info: OverflowInfo, reply_tokens: int) -> bool:
    """Whether the error's own figures put the request under its limit (a gateway's error that is not one of size)."""
    if info.limit is None or info.prompt_tokens is None:
        return False
    return info.prompt_tokens + max(info.max_tokens or 0, reply_tokens) < info.limit


def _far_under_stated_limit(info: OverflowInfo, rejected: int, reply_tokens: int) -> bool:
    """Whether an error naming the limit but not the request's size refused a request its limit has room for.

    By our count even at the counter's calibration bound (:data:`SHARED_RATIO_MAX`): "maximum context length is
    128000 tokens" for a request of 25,000 says something else went wrong (another request's error relayed, a
    gateway's quota). Recovery still retries smaller, but the limit learned under the rejected request is
    provisional: durable, it kept the session under 95% of that request for good.
    """
    if info.limit is None or info.prompt_tokens is not None:
        return False
    return rejected * SHARED_RATIO_MAX + max(info.max_tokens or 0, reply_tokens) < info.limit


def _target(info: OverflowInfo, ratio: float, reply_tokens: int) -> int | None:
    """Tokens (ours) the view must fit for the provider to accept it, or None when the error gave no limit."""
    if info.limit is None:
        return None
    limit = max(0, info.limit - max(info.max_tokens or 0, reply_tokens))
    return max(0, int(limit / ratio * (1 - LIMIT_SAFETY_MARGIN)))


def _figures(info: OverflowInfo) -> str:
    said = f"{info.provider or 'the provider'} said: {info.message}"
    if info.prompt_tokens is not None and info.limit is not None:
        return f"{info.prompt_tokens} tokens > {info.limit}; {said}"
    return said


def essential_tokens(cm: ContextManager) -> int:
    """Tokens (ours) of what recovery never takes out: pinned roles, protected messages, the latest user message.

    With the request extras (tool schemas): a limit inferred under it would leave no room for the request itself.
    """
    messages = cm.messages()
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    policy = cm.policy
    kept = [m for i, m in enumerate(messages) if i == last_user or m.role in policy.roles_never_prune or m.protected]
    return cm.counter.count_messages(kept) + cm.request_extras_tokens


def counted_tokens(cm: ContextManager) -> int:
    """Tokens of the view and the request extras (tool schemas, …) by our own count (one scale before and after)."""
    return cm.counter.count_messages(cm.messages()) + cm.request_extras_tokens


def drop_oldest(messages: Sequence[Message], target_tokens: int, counter: MessageCounter,
                policy: Policy) -> list[Message]:
    """Drop the oldest messages, each with its tool-call partners, until the view fits ``target_tokens``.

    Never dropped: pinned roles (``policy.roles_never_prune``), protected messages and protected tools' results,
    summaries and retained facts, and the latest user message (the request being served). The result is
    normalized, so it still opens with a user message. When nothing droppable is left it may stay over the
    target; the caller's stall guard decides.
    """
    total = counter.count_messages(messages)
    if total <= target_tokens:
        return list(messages)
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    fixed = {i for i, m in enumerate(messages) if i == last_user or not _droppable(m, policy)}
    results: dict[int, set[int]] = {}
    for call_index, result_index in tool_pairs(messages).values():
        if result_index is not None:
            results.setdefault(call_index, set()).add(result_index)
            if call_index in fixed:
                fixed.add(result_index)  # removing the result would rewrite a message that must stay as it is
    drop: set[int] = set()
    freed = 0
    for i in range(len(messages)):
        if total - freed <= target_tokens:
            break
        if i in drop or i in fixed:
            continue
        group = {i} | results.get(i, set())
        if group & fixed:
            continue  # a protected result keeps its call
        freed += sum(counter.count_message(messages[j]) for j in group - drop)
        drop |= group
    return normalize(remove_messages(messages, drop))


def _droppable(m: Message, policy: Policy) -> bool:
    if m.role in policy.roles_never_prune or m.protected or m.kind in _UNDROPPABLE_KINDS:
        return False
    tools = policy.protected_tools
    if m.role == "tool" and m.name is not None and m.name in tools:
        return False
    return not any(call.name in tools for call in m.tool_calls)
