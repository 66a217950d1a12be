"""Which tool outputs masking takes first, and which it must leave: the ordering side of masking.

Masking (:func:`contextfold.cache.masking.mask_tool_outputs`) decides how much to free; this module says in what
order, from the per-tool policies and the calls in the view: superseded reads first (their content is stale or shown
again later), then outputs whose tool's ``mask_after_turns`` has passed, then the rest oldest first; outputs of tools
that are never masked, and outputs still inside their tool's ``mask_after_turns``, not at all. Keeping this apart
from the decision (when to mask, how much) lets a cache-aware decision change one without the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..messages import Message
from ..pairing import ToolPair, pair_list
from .resources import superseded_reads
from .tool_policy import ToolPolicies

__all__ = ["MaskOrder", "mask_order", "turns_after"]


@dataclass(frozen=True, slots=True)
class MaskOrder:
    """What masking takes first and what it leaves.

    Attributes:
        first: Result indices to mask before any other, in this order (when masking may take them at all: the
            answered results and the last ``keep_tool_io_pairs`` stay).
        exempt: Result indices masking must leave.
        superseded: ``{result index: index of the call that superseded it}`` (a subset of ``first``).
        due: Result indices whose tool's ``mask_after_turns`` has passed (a subset of ``first``).
    """

    first: tuple[int, ...] = ()
    exempt: frozenset[int] = frozenset()
    superseded: dict[int, int] = field(default_factory=dict)
    due: tuple[int, ...] = ()


def turns_after(messages: Sequence[Message]) -> list[int]:
    """For each index, how many assistant messages (model turns) come after it."""
    out = [0] * len(messages)
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        out[i] = seen
        if messages[i].role == "assistant":
            seen += 1
    return out


def mask_order(messages: Sequence[Message], policies: ToolPolicies, *, superseded: bool = True,
               pairs: Sequence[ToolPair] | None = None, stale: Mapping[int, int] | None = None) -> MaskOrder:
    """The masking order of ``messages`` under ``policies`` (see the module docstring).

    Args:
        messages: The view.
        policies: The per-tool policies (resource rules included).
        superseded: Put superseded reads first (``policy.superseded_reads``).
        pairs: ``pair_list(messages)``, when the caller keeps it (the manager's view does).
        stale: ``superseded_reads(messages, ...)``, when the caller keeps it (the manager's masking does).
    """
    pairs = pair_list(messages) if pairs is None else pairs
    if not superseded:
        stale = {}
    elif stale is None:
        stale = superseded_reads(messages, policies.resource_rule, pairs)
    exempt: set[int] = set()
    due: list[int] = []
    if policies.configured:
        after: list[int] | None = None
        for pair in pairs:
            index = pair.result_index
            if index is None or messages[index].role != "tool":
                continue
            rules = policies.for_tool(pair.name)
            if not rules.maskable:
                exempt.add(index)
            elif rules.mask_after_turns is not None:
                after = after if after is not None else turns_after(messages)
                if after[index] >= rules.mask_after_turns:
                    due.append(index)
                else:
                    exempt.add(index)  # still inside its tool's turns
    stale = {i: by for i, by in stale.items() if i not in exempt}
    first = sorted(stale)
    first += [i for i in due if i not in stale]
    return MaskOrder(tuple(first), frozenset(exempt), stale, tuple(due))
