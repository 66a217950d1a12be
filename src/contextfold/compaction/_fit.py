"""Fitting a compaction into its budget before anything is summarized.

The summarizer is called once per compaction (it may be an LLM call), so the layout is chosen first, with a
fixed reserve for the summary: keep counts shrink step by step until pinned + protected + user block + reserve +
recent messages fit. The summary is then cut to its reserve if the summarizer overshoots.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..errors import InsufficientBudget
from ..messages import Message
from ..pairing import safe_split_points
from ._partition import Keep, Partition, recent_indices, select_user_messages

if TYPE_CHECKING:
    from .policy import Policy

__all__ = ["MIN_SUMMARY_TOKENS", "SUMMARY_MAX_SHARE_OF_FREE", "Layout", "cap_messages", "fit_hard", "fit_soft",
           "layout", "reductions", "summary_reserve"]

# A summary shorter than this cannot say what the task is and where it stands; below it we only keep the header.
MIN_SUMMARY_TOKENS = 64
# The summary takes at most half of what pinned and protected messages leave free, so that recent turns, which
# the next step builds on, keep the other half.
SUMMARY_MAX_SHARE_OF_FREE = 0.5
# The user-message budget is halved per step when fitting; below this it drops to zero (one short request).
USER_BUDGET_FLOOR = 256

_FRONT_ROLES = frozenset({"system", "developer", "user"})


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each surviving message goes, and what the summarizer reads.

    Attributes:
        front: Pinned messages lifted before everything else.
        user_block: User messages kept verbatim before the summary.
        kept: Messages after the summary, in original order (protected units, recent turns and tool I/O, and
            pinned or selected user messages that sit among them).
        summarized: What the new summary covers, in order (including the user messages kept verbatim, so the
            summary tells the whole story).
        removed: What leaves the view, in order (summarized minus the user block, plus earlier summaries and
            retain blocks).
        estimated_tokens: Tokens of the layout with the summary counted at its full reserve.
        reserve: Tokens set aside for the summary and retain messages.
        keep: The keep counts that produced it.
        split: The split index of a soft compaction.
    """

    front: tuple[int, ...]
    user_block: tuple[int, ...]
    kept: tuple[int, ...]
    summarized: tuple[int, ...]
    removed: tuple[int, ...]
    estimated_tokens: int
    reserve: int
    keep: Keep | None = None
    split: int | None = None

    @property
    def message_count(self) -> int:
        """Messages of the view this layout makes, counting the summary and a retain block (one may be absent)."""
        return len(self.front) + len(self.user_block) + len(self.kept) + _SUMMARY_AND_RETAIN


# The summary message and the retain block: a layout's message count assumes both, so a cap is never overshot.
_SUMMARY_AND_RETAIN = 2


def summary_reserve(part: Partition, policy: Policy, budget: int, framing: int, overhead: int = 0) -> tuple[int, int]:
    """Tokens set aside for the summary and retain messages: (preferred, least).

    ``framing`` is an empty summary message's cost; ``budget`` is what the messages may take; ``overhead`` what
    the request costs besides (for the error's figures).

    Raises:
        InsufficientBudget: pinned and protected messages alone (plus an empty summary) exceed ``budget``.
    """
    fixed = part.fixed_tokens()
    if fixed + framing > budget:
        needed, total = fixed + framing + overhead, budget + overhead
        raise InsufficientBudget(
            f"pinned and protected messages need {fixed} tokens (plus {framing} for the summary header) but the "
            f"budget is {total}: use a model with a larger window, raise trigger_pct or lower hard_cap_buffer, "
            f"unprotect messages (meta 'protected'), drop names from protected_tools, or remove roles from "
            f"roles_never_prune ({', '.join(policy.roles_never_prune) or 'none'})",
            needed=needed,
            budget=total,
        )
    free = budget - fixed
    least = min(framing + MIN_SUMMARY_TOKENS, free)
    wanted = max(least, int(free * SUMMARY_MAX_SHARE_OF_FREE))
    return min(policy.summary_max_tokens + framing, wanted, free), least


def layout(messages: Sequence[Message], part: Partition, recent: set[int], keep: Keep, reserve: int,
           *, split: int | None = None) -> Layout:
    """Place every message given the ``recent`` set that stays verbatim."""
    protected = {i for unit in part.protected for i in unit.indices}
    leaving = [i for unit in part.units for i in unit.indices if i not in recent]
    leaving.sort()
    selected = select_user_messages(messages, part, leaving, keep)
    cut = min(recent) if recent else len(messages)
    # Only roles that may open a conversation go before the summary: a pinned assistant message up front would make
    # the view start with the assistant, which Anthropic and Gemini reject.
    front = tuple(i for i in part.pinned if i < cut and messages[i].role in _FRONT_ROLES)
    later = {i for i in part.pinned if i not in front}
    user_block = tuple(i for i in selected if i < cut)
    kept = tuple(sorted(recent | protected | later | {i for i in selected if i >= cut}))
    removed = tuple(sorted(set(leaving) - set(selected) | set(part.summaries) | set(part.retained)))
    estimated = sum(part.tokens[i] for i in (*front, *user_block, *kept)) + reserve
    return Layout(front, user_block, kept, tuple(leaving), removed, estimated, reserve, keep, split)


def reductions(start: Keep, reserve: int, least: int) -> Iterator[tuple[Keep, int]]:
    """Keep counts and summary reserves from ``start`` down to nothing, one step at a time.

    FACTs go first and INSTRUCTIONs last (see :mod:`~contextfold.compaction.classification`): tool I/O pairs
    (retrievable from the archive and the tool output cache) shrink to 1, then turns to 1, then both to 0 (the
    turns' user requests then compete for the user block, so they are not lost yet); then the summary reserve
    halves down to ``least``;
    then the user-message budget halves and the last request goes too; the answered message goes only when
    nothing else is left.
    """
    keep = start
    yield keep, reserve
    steps: list[tuple[str, int]] = [("pairs", 1), ("turns", 1), ("pairs", 0), ("turns", 0)]
    for name, floor in steps:
        while getattr(keep, name) > floor:
            value = getattr(keep, name) - 1 if floor else 0
            keep = replace(keep, pairs=value) if name == "pairs" else replace(keep, turns=value)
            yield keep, reserve
    while reserve > least:
        reserve = max(least, reserve // 2)
        yield keep, reserve
    while keep.user_budget > 0:
        half = keep.user_budget // 2
        keep = replace(keep, user_budget=half if half >= USER_BUDGET_FLOOR else 0)
        yield keep, reserve
    if keep.retain_last > 0:
        keep = replace(keep, retain_last=0)
        yield keep, reserve
    # Last resort, for an answered message bigger than the whole budget: the view must fit.
    yield replace(keep, answered=False), reserve


def cap_messages(lay: Layout, part: Partition, max_messages: int | None) -> Layout:
    """``lay`` with its oldest verbatim user messages moved to the summary until it has ``max_messages`` at most.

    Short user messages are cheap in tokens, so a token budget alone can keep thousands of them and leave the view
    over the message cap, compacting again on every turn. The newest requests stay; the summary covers the rest.
    """
    excess = 0 if max_messages is None else lay.message_count - max_messages
    if excess <= 0 or not lay.user_block:
        return lay
    dropped = lay.user_block[:excess]
    user_block = lay.user_block[len(dropped):]
    removed = tuple(sorted({*lay.removed, *dropped}))
    estimated = lay.estimated_tokens - sum(part.tokens[i] for i in dropped)
    return replace(lay, user_block=user_block, removed=removed, estimated_tokens=estimated)


def fit_hard(messages: Sequence[Message], part: Partition, start: Keep, reserve: int, least: int,
             budget: int, max_messages: int | None = None) -> Layout:
    """The first layout, shrinking keep counts and the summary reserve from ``start``, that fits ``budget``.

    With ``max_messages``, a layout must also have that many messages at most (user messages kept verbatim are
    trimmed first, recent turns only after). At the end of the reductions only pinned and protected messages and
    the least reserve remain, which :func:`summary_reserve` checked fit in tokens, so this always returns; it may
    still exceed ``max_messages`` when pinned and protected messages alone do (the caller checks).
    """
    best: Layout | None = None
    for keep, room in reductions(start, reserve, least):
        best = cap_messages(layout(messages, part, recent_indices(messages, part, keep), keep, room), part,
                            max_messages)
        if best.estimated_tokens <= budget and (max_messages is None or best.message_count <= max_messages):
            return best
    assert best is not None  # reductions always yields at least its start
    return best


def fit_soft(messages: Sequence[Message], part: Partition, keep: Keep, reserve: int, budget: int,
             max_messages: int | None = None) -> Layout | None:
    """Summarize the oldest half of the compactable messages at a safe split, later if that does not fit.

    Returns None when no split point both leaves recent messages and fits ``budget`` (and ``max_messages``):
    the caller escalates to hard.
    """
    compactable = sorted(i for unit in part.units for i in unit.indices)
    if not compactable:
        return None
    half = (len(compactable) + 1) // 2
    for point in safe_split_points(messages):
        before = sum(1 for i in compactable if i < point)
        if before < half:
            continue
        recent = {i for i in compactable if i >= point}
        if not recent:
            return None
        candidate = cap_messages(layout(messages, part, recent, keep, reserve, split=point), part, max_messages)
        if candidate.estimated_tokens <= budget and (max_messages is None or candidate.message_count <= max_messages):
            return candidate
    return None

