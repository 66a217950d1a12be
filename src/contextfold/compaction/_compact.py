"""The compaction engine: soft, hard and emergency compaction of a message list. Pure: no I/O, no events.

``compact`` returns the new view together with everything the manager needs to archive and report (what left the
view, the summary, figures and warnings). The output always passes :func:`~contextfold.pairing.normalize`
unchanged, pinned and protected messages are the very same objects, and the view fits ``budget`` or
:class:`~contextfold.errors.InsufficientBudget` is raised.

Hard layout: [pinned] + [retain block] + [user messages, most recent first within budget] + [summary vN] +
[protected tool units] + [recent turns and tool I/O]. Soft layout: the same, with the oldest half of the
compactable messages summarized at a safe split and everything after the split kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..answered import answered_indices
from ..errors import ConfigError, ContextfoldError, InsufficientBudget, SummarizerError
from ..messages import EMPTY, Message, freeze
from ..pairing import (
    BOUNDARY_KIND,
    ToolPair,
    check_messages,
    normalize,
    pair_list,
    strip_trailing_tool_calls,
)
from ..summarize.base import Summarizer, SummaryRequest, SummaryResult
from ..tokens import MessageCounter
from ._fit import MIN_SUMMARY_TOKENS, Layout, fit_hard, fit_soft, summary_reserve
from ._partition import Keep, Partition, partition
from ._rebuild import SummaryBuilder, assemble, fit_summary, previous_facts, previous_summary

# A summary never takes more than half the tokens of the messages (and earlier summary) it replaces.
SUMMARY_MAX_SHARE_OF_REPLACED = 0.5

if TYPE_CHECKING:
    from .policy import Policy

__all__ = ["CompactionKind", "CompactionPlan", "CompactionResult", "CompactionStats", "compact", "plan_compaction"]

CompactionKind: TypeAlias = Literal["soft", "hard", "emergency"]
_KINDS: tuple[str, ...] = ("soft", "hard", "emergency")

# The message cap was hit: keep half as many recent turns and tool pairs, so the view shrinks in messages as well.
EMERGENCY_KEEP_DIVISOR = 2
# An emergency compaction leaves at most this share of the message cap, so the view can grow for a while before the
# cap is reached again (landing just under it would compact again on the next turn).
EMERGENCY_MESSAGE_TARGET_SHARE = 0.5
# User messages kept verbatim take at most this share of a compaction's budget (and never more than
# policy.user_message_budget). 004's 20,000 tokens is a sixth of a 128K window but more than a whole 8K one: there the
# block of verbatim requests grew until nothing else fitted, and every later compaction freed a few hundred tokens
# (a user-heavy session at 8K compacted on 23 of 30 turns; a tool-heavy one, whose 1,300 short requests all stayed,
# 385 times in 1,500 turns). From a ~96K window up the policy's budget is the smaller one.
USER_BLOCK_MAX_SHARE = 0.5
# Header counts used to size the summary's framing: a wide count so the real header is never longer.
_FRAMING_PROBE_COUNT = 10**6


@dataclass(frozen=True, slots=True)
class CompactionStats:
    """Figures of one compaction.

    ``compacted_count`` is the number of messages this compaction summarized; the summary message's
    ``meta['compacted_count']`` is cumulative over the rolling summaries it folds in. ``kept`` counts the messages
    kept per layer: ``pinned``, ``protected``, ``user`` (user messages kept verbatim from the compacted part),
    ``recent``, and ``retained_facts`` (facts in the retain block).
    """

    kind: str
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    compacted_count: int
    budget: int
    kept: Mapping[str, int] = field(default_factory=lambda: EMPTY)
    summary_tokens: int = 0
    summary_version: int = 0
    keep_turns: int | None = None
    keep_pairs: int | None = None
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The figures as plain JSON-ready data (for events and the archive)."""
        return {
            "kind": self.kind,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "compacted_count": self.compacted_count,
            "budget": self.budget,
            "kept": dict(self.kept),
            "summary_tokens": self.summary_tokens,
            "summary_version": self.summary_version,
            "keep_turns": self.keep_turns,
            "keep_pairs": self.keep_pairs,
            "duration_ms": self.duration_ms,
        }


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction would do, before the summarizer is called (see :func:`plan_compaction`)."""

    kind: str
    messages: tuple[Message, ...]
    layout: Layout
    partition: Partition
    reserve: int
    warnings: tuple[str, ...] = ()
    # ``pair_list(messages)``, for the compaction that follows (the summary's input is paired from it).
    pairs: tuple[ToolPair, ...] = ()


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """The compacted view and what the manager archives and reports.

    Attributes:
        messages: The new view.
        removed: Messages that left the view, in original order (archive them before replacing the view).
        summary: What the summarizer returned (None when nothing was compacted).
        summary_message: The summary as it sits in the view.
        stats: Figures for events and reports.
        warnings: Things the user should hear about (summaries cut, keep counts reduced, repeated compaction).
        summarized: Every message the summary covers, in order (a superset of what was removed from the
            compactable history: user messages kept verbatim are summarized too).
        retain_message: The block of verbatim facts, when there is one.
    """

    messages: list[Message]
    removed: list[Message]
    summary: SummaryResult | None
    summary_message: Message | None
    stats: CompactionStats
    warnings: tuple[str, ...] = ()
    summarized: tuple[Message, ...] = ()
    retain_message: Message | None = None

    @property
    def changed(self) -> bool:
        """Whether the view differs from the input."""
        return self.summary_message is not None


def plan_compaction(
    messages: Sequence[Message],
    *,
    policy: Policy,
    counter: MessageCounter,
    budget: int,
    kind: CompactionKind | str = "hard",
    counted: tuple[Sequence[int], Sequence[ToolPair]] | None = None,
    prechecked: bool = False,
) -> CompactionPlan:
    """Choose what to keep and what to summarize, without summarizing (a dry run of :func:`compact`).

    ``counted``: each message's tokens (as ``counter`` counts it) and ``pair_list(messages)``, when the caller keeps
    them (a manager's view does, issue 22): planning then neither pairs nor counts the messages again. They are
    used only if ``messages`` is normalized (checked; else it is normalized, paired and counted here).
    ``prechecked``: every message passed :func:`~contextfold.pairing.check_messages` already (a manager's view whose
    messages were all checked when added: not checked again, issue 22).

    Raises:
        InvalidHistory: a message is malformed (the index and field are named).
        ConfigError: ``kind`` or ``budget`` is invalid.
        InsufficientBudget: pinned and protected messages alone exceed ``budget``.
    """
    if kind not in _KINDS:
        raise ConfigError(f"unknown compaction kind {kind!r}; choose one of {', '.join(_KINDS)}", field="kind")
    if budget <= 0:
        raise ConfigError(f"must be a positive number of tokens, got {budget}", field="budget")
    checked = list(messages) if prechecked else check_messages(messages)
    view, pairs = normalized_with_pairs(checked, None if counted is None else list(counted[1]))
    if counted is not None and view is checked and len(counted[0]) == len(view):
        tokens = list(counted[0])
    else:
        tokens = [counter.count_message(m) for m in view]
    part = partition(view, policy, tokens, pairs)
    # Per-message counts leave out what a request costs once (the reply priming); the budget must cover it.
    overhead = _request_overhead(counter)
    budget -= overhead
    reserve, least = summary_reserve(part, policy, budget, _framing(counter, policy.summary_header), overhead)
    keep = _start_keep(policy, kind, budget)
    max_messages = _message_limit(policy, kind)
    warnings: list[str] = []
    chosen: Layout | None = None
    if kind == "soft":
        chosen = fit_soft(view, part, keep, reserve, budget, max_messages)
        if chosen is None:
            warnings.append("soft compaction could not fit the budget at any split point; compacted hard instead")
            kind = "hard"
    if chosen is None:
        chosen = fit_hard(view, part, keep, reserve, least, budget, max_messages)
        if chosen.message_count > max_messages:
            warnings.append(
                f"the compacted view keeps {chosen.message_count} messages, over the limit of {max_messages} "
                f"(message cap {policy.emergency_message_count}): pinned and protected messages alone number "
                f"{len(part.fixed_indices())}; raise emergency_message_count or unpin messages")
        _refuse_to_drop_the_request(view, part, chosen, budget + overhead, overhead)
        if chosen.keep is not None and (chosen.keep != keep or chosen.reserve != reserve):
            k = chosen.keep
            warnings.append(
                f"keep counts reduced to fit {budget + overhead} tokens: recent turns {keep.turns}→{k.turns}, "
                f"tool I/O pairs {keep.pairs}→{k.pairs}, summary reserve {reserve}→{chosen.reserve}, "
                f"user-message budget {keep.user_budget}→{k.user_budget}"
            )
    return CompactionPlan(kind, tuple(view), chosen, part, chosen.reserve, tuple(warnings), tuple(pairs))


def normalized_with_pairs(messages: list[Message],
                          pairs: list[ToolPair] | None = None) -> tuple[list[Message], list[ToolPair]]:
    """``normalize(messages)`` and its ``pair_list``, paired once when ``messages`` is normalized already.

    What a manager hands to compaction is its normalized view (issue 22: planning a 100,000-message view normalized
    and paired it about eight times). One pass checks every invariant :func:`~contextfold.pairing.normalize`
    establishes; only a history that breaks one is normalized (and paired again). ``pairs``: ``pair_list(messages)``
    when the caller has it (not paired again).
    """
    if pairs is None:
        pairs = pair_list(messages)
    if _is_normalized(messages, pairs):
        return messages, pairs
    view = normalize(messages)
    return view, pair_list(view)


def pairs_within(pairs: Sequence[ToolPair], indices: Sequence[int]) -> list[ToolPair]:
    """``pair_list`` of the messages at ``indices`` (ascending), from the pairs of the whole history (issue 22).

    Exact when ``indices`` are whole units of a normalized history (each call with all its results), as what a
    compaction summarizes is: every result still follows its call. Otherwise what it gives may differ, and
    :func:`normalized_with_pairs` finds the history not normalized (a result whose call is left out, or a call whose
    result is) and pairs it anew.
    """
    # (made in C: a compaction's indices are most of the view)
    position = dict(zip(indices, range(len(indices)), strict=True))
    where = position.get
    out: list[ToolPair] = []
    put = out.append
    for pair in pairs:
        at = where(pair.call_index)
        if at is not None:
            result = pair.result_index
            put(ToolPair(pair.call_id, pair.name, at, None if result is None else where(result)))
    return out


def normalized_within(messages: list[Message], pairs: Sequence[ToolPair], indices: Sequence[int]) -> list[Message]:
    """``normalize(messages)``, where ``messages`` are the messages at ``indices`` of a history paired as ``pairs``.

    What ``normalized_with_pairs(messages, pairs_within(pairs, indices))[0]`` gives, without a pair object made per
    call (issue 22: the summary's input is most of a 100,000-message view, ~49,000 calls).
    """
    position = dict(zip(indices, range(len(indices)), strict=True))
    where = position.get
    calls: list[int] = []
    results: list[int | None] = []
    for pair in pairs:
        at = where(pair.call_index)
        if at is not None:
            result = pair.result_index
            calls.append(at)
            results.append(None if result is None else where(result))
    return messages if _links_normalized(messages, calls, results) else normalize(messages)


def _is_normalized(messages: list[Message], pairs: list[ToolPair]) -> bool:
    """Whether ``normalize(messages)`` would return ``messages`` unchanged (``pairs``: their ``pair_list``).

    That is: no call id twice in one message, every call answered, each call's result right after its message in
    the order of the calls (so no result is an orphan or out of place), no empty user or assistant message, and
    the conversation opening with the user (or a provider's compaction item) after system/developer messages.
    """
    return _links_normalized(messages, list(map(_CALL_INDEX, pairs)), list(map(_RESULT_INDEX, pairs)))


_CALL_INDEX = attrgetter("call_index")
_RESULT_INDEX = attrgetter("result_index")


def _links_normalized(messages: list[Message], call_at: list[int], result_at: list[int | None]) -> bool:
    """:func:`_is_normalized` given each pair's call index and result index (or None), in pair order."""
    if None in result_at:
        return False
    results = set(result_at)
    after_calls = False  # (whether the messages since the last non-tool one follow tool calls)
    opened = False
    for i, m in enumerate(messages):
        role = m.role
        if role == "tool":
            if not after_calls or i not in results:
                return False
            continue
        calls = m.tool_calls
        after_calls = bool(calls)
        if not opened and role not in ("system", "developer"):
            if role != "user" and m.kind != BOUNDARY_KIND:
                return False
            opened = True
        if calls:
            # (one call, the common case, cannot repeat an id: no set made for it)
            if role != "assistant" or (len(calls) > 1 and len({c.id for c in calls}) != len(calls)):
                return False
        elif role in ("user", "assistant") and not _has_content(m):
            return False
    # Each call's result is the next message after the previous call's: results in call order, right after.
    last_call, position = -1, 0
    for call, result in zip(call_at, result_at, strict=True):
        position = position + 1 if call == last_call else call + 1
        last_call = call
        if result != position:
            return False
    return True


def _has_content(m: Message) -> bool:
    """As ``pairing._has_content``, without a stripped copy of every text (``isspace`` stops at the first letter)."""
    if isinstance(m.content, str):
        return bool(m.content) and not m.content.isspace()
    return any(not (p.type == "text" and not getattr(p, "text", "").strip()) for p in m.content)


def compact(
    messages: Sequence[Message],
    *,
    policy: Policy,
    counter: MessageCounter,
    summarizer: Summarizer,
    budget: int,
    kind: CompactionKind | str = "hard",
    compaction_count: int = 0,
    instructions: str | None = None,
    clock: Callable[[], datetime] | None = None,
    plan: CompactionPlan | None = None,
) -> CompactionResult:
    """Compact ``messages`` to fit ``budget`` tokens.

    Args:
        messages: The current view (normalized here first).
        policy: Keep rules, protection and summary settings.
        counter: Counts messages (cached per message).
        summarizer: Called at most once, with the messages leaving the view and the earlier summary.
        budget: Tokens the new view must fit.
        kind: ``"soft"`` summarizes the oldest half, ``"hard"`` rebuilds, ``"emergency"`` rebuilds keeping half.
        compaction_count: Compactions already done in this session (for the repeated-compaction warning).
        instructions: A user's manual request for the summary (``/compact keep the failing test names``).
        clock: Gives ``compacted_at``; inject one for deterministic output.
        plan: ``plan_compaction(messages, ...)`` with this policy, counter, budget and kind, when the caller made
            that dry run already (the manager does, to choose its target): it is not made again.

    Raises:
        InsufficientBudget: pinned and protected messages alone exceed ``budget``; says what to change.
        SummarizerError: the summarizer failed.
    """
    started = time.perf_counter()
    if compaction_count < 0:
        raise ConfigError(f"must not be negative, got {compaction_count}", field="compaction_count")
    if plan is None:
        plan = plan_compaction(messages, policy=policy, counter=counter, budget=budget, kind=kind)
    view, lay, part = list(plan.messages), plan.layout, plan.partition
    # (The plan counted every message of the view with this counter: its counts plus a request's overhead.)
    tokens_before = sum(part.tokens) + (_request_overhead(counter) if view else 0)
    warnings = list(plan.warnings)
    if not lay.summarized and not part.summaries and not part.retained and tokens_before <= budget:
        warnings.append("nothing to compact: every message is pinned, protected or recent")
        stats = CompactionStats(plan.kind, tokens_before, tokens_before, len(view), len(view), 0, budget,
                                duration_ms=_ms(started))
        return CompactionResult(view, [], None, None, stats, tuple(warnings))

    old_text, old_version, old_covered, old_original = previous_summary([view[i] for i in part.summaries])
    summarized = [view[i] for i in lay.summarized]
    # The user messages the layout keeps word for word: a summary repeating them would only spend the view twice
    # on the same request (measured: the task statement three times in one SWE-agent view).
    staying = [view[i] for i in sorted({*lay.front, *lay.user_block, *lay.kept})]
    verbatim = tuple(dict.fromkeys(m.text for m in staying if m.role == "user" and m.kind is None and m.text))
    for_summary = strip_trailing_tool_calls(summarized)
    # (A trailing call stripped changes the last message: then the pairs are made anew.)
    unchanged = len(for_summary) == len(summarized) and (not summarized or for_summary[-1] is summarized[-1])
    request = SummaryRequest(
        # (for_summarizer: whole units of a normalized view are normalized already, bar a trailing call)
        messages=tuple(normalized_within(for_summary, plan.pairs, lay.summarized) if plan.pairs and unchanged
                       else normalized_with_pairs(for_summary)[0]),
        previous_summary=old_text,
        strategy=policy.strategy,
        instructions=instructions,
        summary_directives=policy.summary_directives,
        retain_directives=policy.retain_directives,
        max_tokens=_summary_tokens(plan.reserve - _framing(counter, policy.summary_header), lay.summarized, part),
        custom_prompt=policy.custom_prompt,
        retain_prompt=policy.retain_prompt,
        verbatim=verbatim,
    )
    result = _summarize(summarizer, request)
    warnings.extend(result.warnings)

    facts = _dedupe([*previous_facts([view[i] for i in part.retained]), *result.retain])
    build = SummaryBuilder(
        version=old_version + 1,
        compacted_count=old_covered + len(summarized),
        original_token_count=old_original + _tokens_of(part, lay.summarized),
        compacted_at=(clock or _utc_now)(),
        counter=counter,
        role=policy.summary_role,
        header=policy.summary_header,
    )
    summary_msg, retain_msg, cut = fit_summary(result.summary, facts, plan.reserve, counter, build)
    if cut:
        warnings.append(f"summary or retained facts cut to fit the {plan.reserve}-token summary reserve")
    out = assemble(view, front=lay.front, retain=retain_msg, user_block=lay.user_block, summary=summary_msg,
                   kept=lay.kept)
    tokens_after = counter.count_messages(out)
    if tokens_after > budget:  # only a counter whose counts are not additive could get here
        raise InsufficientBudget(f"compacted view needs {tokens_after} tokens but the budget is {budget}",
                                 needed=tokens_after, budget=budget)
    done = compaction_count + 1
    if _warns_after(done, policy.warn_after_compactions):
        warnings.append(f"this session has been compacted {done} times; each summary loses detail, so accuracy "
                        "degrades (consider starting a fresh session with the summary)")
    stats = _stats(plan, lay, part, out, tokens_before, tokens_after, budget, summary_msg, retain_msg, started)
    return CompactionResult(
        messages=out,
        removed=[view[i] for i in lay.removed],
        summary=result,
        summary_message=summary_msg,
        stats=stats,
        warnings=tuple(warnings),
        summarized=tuple(summarized),
        retain_message=retain_msg,
    )


def _refuse_to_drop_the_request(view: Sequence[Message], part: Partition, chosen: Layout, budget: int,
                                overhead: int) -> None:
    """Raise when the layout fits only by dropping the user request being answered (the fit's last resort).

    A view without the request makes the model answer a summary: better a clear error. (The manager cuts such a
    request to a view with its ref first when it has a tool output cache; this is what is left without one.)
    ``budget`` is the whole request's, ``overhead`` what a request costs besides its messages.
    """
    if chosen.keep is None or chosen.keep.answered:
        return
    staying = {*chosen.front, *chosen.user_block, *chosen.kept}
    for i in answered_indices(view) if part.answered is None else part.answered:
        # What the smallest view would take with the request in it: pinned and protected messages, the least
        # summary, the request. (A request dropped for the message cap alone fits in tokens: not this error.)
        needed = chosen.estimated_tokens + part.tokens[i] + overhead
        if view[i].role == "user" and view[i].kind is None and i not in staying and needed > budget:
            raise InsufficientBudget(
                f"the user message being answered (message {i}) takes {part.tokens[i]:,} tokens; with the pinned "
                f"messages and the least summary the view would need {needed:,} of a {budget:,}-token budget, so "
                "it would leave the view: shorten it, use a model with a larger window, or give the manager a tool "
                "output cache (store=...), which keeps it cut to a view whose full text is readable by ref",
                needed=needed, budget=budget)


def _warns_after(done: int, first: int) -> bool:
    """Whether the ``done``-th compaction repeats the "compacted N times" warning: at ``first``, then each doubling.

    Once per compaction was a warning on almost every turn of a long session (19 of 20 compactions in one run), so
    users learned to ignore it; at 2, 4, 8, 16, … it still says, now and then, that the count keeps growing.
    """
    if done < first:
        return False
    ratio, rest = divmod(done, first)
    return rest == 0 and ratio & (ratio - 1) == 0


def _summary_tokens(reserve: int, summarized: Sequence[int], part: Partition) -> int:
    """The summary's token budget: the reserve, but at most half of what it replaces (``summarized``: indexes).

    Once old tool outputs are masked, the oldest part of a history is cheap; a summary as long as the reserve
    would then make the view longer than before compacting.
    """
    replaced = _tokens_of(part, summarized) + _tokens_of(part, part.summaries)
    cap = max(MIN_SUMMARY_TOKENS, int(replaced * SUMMARY_MAX_SHARE_OF_REPLACED))
    return max(1, min(reserve, cap))


def _tokens_of(part: Partition, indices: Sequence[int]) -> int:
    """The tokens of the messages at ``indices`` (summed in C: a compaction's indices are most of the view)."""
    return sum(map(part.tokens.__getitem__, indices))


def _start_keep(policy: Policy, kind: str, budget: int) -> Keep:
    """The keep counts a compaction starts fitting from (``budget``: tokens the messages may take)."""
    user_budget = min(policy.user_message_budget, int(budget * USER_BLOCK_MAX_SHARE))
    keep = Keep(policy.keep_recent_turns, policy.keep_tool_io_pairs, user_budget, policy.retain_last_turns)
    if kind != "emergency":
        return keep
    return Keep(_halve(keep.turns), _halve(keep.pairs), keep.user_budget, keep.retain_last)


def _message_limit(policy: Policy, kind: str) -> int:
    """Messages the compacted view may keep: under the cap, and well under it after an emergency."""
    cap = policy.emergency_message_count
    if kind == "emergency":
        return max(1, int(cap * EMERGENCY_MESSAGE_TARGET_SHARE))
    return cap - 1


def _halve(n: int) -> int:
    return max(1, n // EMERGENCY_KEEP_DIVISOR) if n > 0 else 0


def _request_overhead(counter: MessageCounter) -> int:
    probe = Message("user", "x")
    return max(0, counter.count_messages([probe]) - counter.count_message(probe))


def _framing(counter: MessageCounter, header: str | None = None) -> int:
    probe = SummaryBuilder(version=_FRAMING_PROBE_COUNT, compacted_count=_FRAMING_PROBE_COUNT,
                           original_token_count=0, compacted_at=datetime(2000, 1, 1, tzinfo=UTC), counter=counter,
                           header=header)
    return counter.count_message(probe(""))


def _summarize(summarizer: Summarizer, request: SummaryRequest) -> SummaryResult:
    try:
        result = summarizer.summarize(request)
    except ContextfoldError:
        raise
    except Exception as exc:  # a third-party summarizer's failure, reported as ours with its cause
        raise SummarizerError(f"{type(summarizer).__name__} failed: {exc}") from exc
    if not isinstance(result, SummaryResult):
        raise SummarizerError(f"{type(summarizer).__name__}.summarize returned {type(result).__name__}, "
                              "expected SummaryResult")
    return result


def _stats(plan: CompactionPlan, lay: Layout, part: Partition, out: list[Message], tokens_before: int,
           tokens_after: int, budget: int, summary_msg: Message, retain_msg: Message | None,
           started: float) -> CompactionStats:
    protected = {i for unit in part.protected for i in unit.indices}
    pinned = set(part.pinned)
    summarized = set(lay.summarized)  # (once, not once per kept message)
    user = set(lay.user_block) | {i for i in lay.kept if i in summarized}
    facts = retain_msg.meta.get("retain_facts", ()) if retain_msg is not None else ()
    return CompactionStats(
        kind=plan.kind,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        messages_before=len(plan.messages),
        messages_after=len(out),
        compacted_count=len(lay.summarized),
        budget=budget,
        kept=freeze({
            "pinned": len(pinned),
            "protected": len(protected),
            "user": len(user),
            "recent": sum(1 for i in lay.kept if i not in protected and i not in pinned and i not in user),
            "retained_facts": len(facts),
        }),
        summary_tokens=_int(summary_msg.meta.get("summary_token_count")),
        summary_version=_int(summary_msg.meta.get("summary_version")),
        keep_turns=lay.keep.turns if lay.keep else None,
        keep_pairs=lay.keep.pairs if lay.keep else None,
        duration_ms=_ms(started),
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _dedupe(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.strip()
        if key and key not in seen:
            seen.add(key)
            out.append(key)
    return out


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
