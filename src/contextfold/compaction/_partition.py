"""Partitioning a history for compaction: units that move together, layers, and what each keep rule selects.

A *unit* is what can leave the view without breaking pair integrity: an assistant message with tool calls and
all its results, or any other single message. Every selection here is a set of whole units, so whatever is
removed never leaves an orphan call or result behind.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import TYPE_CHECKING

from ..answered import answered_indices
from ..messages import Message
from ..pairing import ToolPair, pair_list
from .classification import Category, classify_all

if TYPE_CHECKING:
    from .policy import Policy

__all__ = ["TURN_ABORTED_MARKER", "Keep", "Partition", "Unit", "build_units", "partition", "recent_indices",
           "select_user_messages"]

# Codex marks a turn the user interrupted with this tag; the model must keep seeing that the turn was cut short.
TURN_ABORTED_MARKER = "<turn-aborted>"
# Aborted-turn markers are kept whatever the user-message budget, as long as they are this small.
MARKER_MAX_TOKENS = 200

_SUMMARY_KIND = "summary"
_RETAIN_KIND = "retain"
# Messages contextfold inserted to keep a history valid; they carry nothing a user wrote.
_SYNTHETIC_KINDS = frozenset({"placeholder"})


@dataclass(frozen=True, slots=True)
class Unit:
    """Indices that must stay or go together (sorted); ``io`` is true for tool I/O (a call group, an observation)."""

    indices: tuple[int, ...]
    io: bool = False

    @property
    def first(self) -> int:
        """Index of the unit's first message."""
        return self.indices[0]


# A Unit's slots, written directly by build_units (a frozen dataclass refuses setattr; its slots do not).
if tuple(f.name for f in fields(Unit)) != ("indices", "io"):  # (a new field must be set by build_units too)
    raise AssertionError("build_units is out of date with Unit's fields")
_new_unit = object.__new__
_set_indices, _set_io = (getattr(Unit, name).__set__ for name in ("indices", "io"))


@dataclass(frozen=True, slots=True)
class Keep:
    """The keep counts one fitting attempt uses."""

    turns: int
    pairs: int
    user_budget: int
    retain_last: int
    answered: bool = True


@dataclass(slots=True)
class Partition:
    """A history split into layers by what compaction may do with each message.

    Attributes:
        tokens: Token count of every message, by index.
        categories: :func:`~contextfold.compaction.classification` of every message, by index.
        pinned: Single messages that are never pruned (``roles_never_prune`` or ``meta.protected``).
        protected: Tool units holding a protected message or a call to a ``protected_tools`` tool.
        summaries: Earlier summary messages, folded into the next summary.
        retained: Earlier retain blocks, whose facts are carried over.
        units: Everything else, in order: what may be summarized.
        answered: :func:`~contextfold.answered.answered_indices` of the history (None: not read yet), read once
            for every fitting attempt.
    """

    tokens: list[int]
    categories: list[Category]
    pinned: list[int] = field(default_factory=list)
    protected: list[Unit] = field(default_factory=list)
    summaries: list[int] = field(default_factory=list)
    retained: list[int] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    answered: tuple[int, ...] | None = None

    def fixed_indices(self) -> set[int]:
        """Indices that survive every compaction: pinned messages and protected units."""
        out = set(self.pinned)
        for unit in self.protected:
            out.update(unit.indices)
        return out

    def fixed_tokens(self) -> int:
        """Tokens of the messages that survive every compaction."""
        return sum(self.tokens[i] for i in self.fixed_indices())


def build_units(messages: Sequence[Message], pairs: Sequence[ToolPair] | None = None) -> list[Unit]:
    """Group ``messages`` into units, in order of their first message.

    User messages that classify as FACT (SWE-agent ``OBSERVATION:`` text) count as tool I/O like real results.
    ``pairs``: ``pair_list(messages)``, when the caller has it.
    """
    pairs = pair_list(messages) if pairs is None else pairs
    # (Each call's message and its result's, read by C loops: ~49,000 calls in a 100,000-message view, issue 22.)
    calls = list(map(_CALL_INDEX, pairs))
    answers = list(map(_RESULT_INDEX, pairs))
    owned = set(answers)
    owned.discard(None)
    single: dict[int, int | None] = dict(zip(calls, answers, strict=True))
    if len(single) < len(calls):  # (a message with several calls: its results grouped, in order of position)
        return _units_grouped(messages, calls, answers, owned)
    units: list[Unit] = []
    put = units.append
    answer_of = single.get
    # (the messages no call owns, the results skipped by a C loop: about half of a view of tool calls)
    for i in itertools.filterfalse(owned.__contains__, range(len(messages))):
        answer = answer_of(i, _NOT_A_CALL)
        # (made slot by slot, as Message._copy does: the dataclass __init__ was most of this loop)
        unit = _new_unit(Unit)
        if answer != _NOT_A_CALL:
            _set_indices(unit, (i,) if answer is None else (i, answer))
            _set_io(unit, True)
        else:
            _set_indices(unit, (i,))
            _set_io(unit, messages[i].role == "tool")
        put(unit)
    return units


def _units_grouped(messages: Sequence[Message], calls: list[int], answers: list[int | None],
                   owned: set[int | None]) -> list[Unit]:
    """:func:`build_units` where a message holds several calls (``calls``, ``answers``: each pair's indices)."""
    results_of: dict[int, list[int]] = {}
    for call, result in zip(calls, answers, strict=True):
        group = results_of.get(call)
        if group is None:
            group = results_of[call] = []
        if result is not None:
            group.append(result)
    units: list[Unit] = []
    put = units.append
    for i, m in enumerate(messages):
        if i in owned:
            continue
        group = results_of.get(i)
        unit = _new_unit(Unit)
        if group is not None:
            _set_indices(unit, (i, *sorted(group)) if len(group) > 1 else (i, *group))
            _set_io(unit, True)
        else:
            _set_indices(unit, (i,))
            _set_io(unit, m.role == "tool")
        put(unit)
    return units


# (what a message that holds no call gets from build_units' look-up of its call's result)
_NOT_A_CALL = -1
_CALL_INDEX = attrgetter("call_index")
_RESULT_INDEX = attrgetter("result_index")


def partition(messages: Sequence[Message], policy: Policy, tokens: list[int],
              pairs: Sequence[ToolPair] | None = None) -> Partition:
    """Split ``messages`` into the layers compaction treats differently (``pairs``: ``pair_list(messages)``)."""
    if pairs is None:
        pairs = pair_list(messages)
    categories = classify_all(messages)
    part = Partition(tokens=tokens, categories=categories, answered=answered_indices(messages, pairs))
    never = set(policy.roles_never_prune)
    tools = set(policy.protected_tools)
    for unit in build_units(messages, pairs):
        i = unit.indices[0]
        m = messages[i]
        if len(unit.indices) > 1 or m.tool_calls:
            if _held(messages, unit.indices, never, tools):
                part.protected.append(unit)
            else:
                part.units.append(unit)
            continue
        # Our own messages are recognised before role rules: with roles_never_prune=("user",) an earlier summary
        # (a user message) must still be folded, or summaries would pile up.
        kind = m.kind  # (read once: this runs for every message of the view)
        if m.protected:
            part.pinned.append(i)
        elif kind == _SUMMARY_KIND:
            part.summaries.append(i)
        elif kind == _RETAIN_KIND:
            part.retained.append(i)
        elif m.role in never and kind not in _SYNTHETIC_KINDS:
            part.pinned.append(i)
        else:
            io = unit.io or (m.role == "user" and categories[i] is Category.FACT and kind not in _SYNTHETIC_KINDS)
            part.units.append(unit if io == unit.io else Unit(unit.indices, io=io))
    return part


def _held(messages: Sequence[Message], indices: tuple[int, ...], never: Collection[str],
          tools: Collection[str]) -> bool:
    """Whether a tool unit holds a protected message, one of a role never pruned, or a protected tool's call/result.

    (Loops, not generators: this runs for every tool unit of the view. Only an assistant carries calls.)
    """
    for j in indices:
        member = messages[j]
        role = member.role
        if member.meta.get("protected") or role in never:
            return True
        if role == "tool":
            if member.name in tools:
                return True
        else:
            for call in member.tool_calls:
                if call.name in tools:
                    return True
    return False


def recent_indices(messages: Sequence[Message], part: Partition, keep: Keep) -> set[int]:
    """What a hard compaction keeps verbatim.

    That is the last ``keep.pairs`` tool I/O units, and the conversation (user requests, assistant text) of the
    last ``keep.turns`` turns. A turn starts at a user request. The unit of the answered message (see
    :mod:`contextfold.answered`) is kept whatever the counts, unless ``keep.answered`` is off (the last resort).
    """
    kept: set[int] = set()
    if keep.answered:
        units = part.units
        firsts = [unit.indices[0] for unit in units]  # (ascending: units come in order of their first message)
        for index in answered_indices(messages) if part.answered is None else part.answered:
            if index in kept:
                # Its unit is kept already (units are disjoint): the answered results of one call share a unit, and
                # adding that unit again for each of thousands of parallel results was quadratic.
                continue
            # The unit holding it starts at the latest first index up to it (units of a normalized view are runs);
            # otherwise (a result far from its call) every unit is looked at.
            at = bisect_right(firsts, index) - 1
            if at >= 0 and index in units[at].indices:
                kept.update(units[at].indices)
                continue
            for unit in units:
                if index in unit.indices:
                    kept.update(unit.indices)
    io_units = [u for u in part.units if u.io]
    if keep.pairs > 0:
        for unit in io_units[-keep.pairs:]:
            kept.update(unit.indices)
    if keep.turns > 0:
        starts = [u.first for u in part.units if not u.io and _is_request(messages[u.first], part.categories[u.first])]
        since = starts[-keep.turns] if len(starts) >= keep.turns else 0
        for unit in part.units:
            if not unit.io and unit.first >= since and messages[unit.first].kind not in _SYNTHETIC_KINDS:
                kept.update(unit.indices)
    return kept


def _is_request(m: Message, category: Category) -> bool:
    return m.role == "user" and category is not Category.FACT and m.kind not in _SYNTHETIC_KINDS


def select_user_messages(messages: Sequence[Message], part: Partition, leaving: Sequence[int], keep: Keep) -> list[int]:
    """User messages among ``leaving`` to keep verbatim, most recent first within ``keep.user_budget``.

    The last ``keep.retain_last`` requests are kept whatever their size; small ``<turn-aborted>`` markers are
    always kept; FACT-like user messages (pasted logs, observations) are never selected, since the summary and
    the archive carry them. Returned in original order.
    """
    categories = part.categories
    # (_is_request inlined, the role first: ``leaving`` is most of a long view)
    candidates = [i for i in leaving if (m := messages[i]).role == "user" and categories[i] is not Category.FACT
                  and m.kind not in _SYNTHETIC_KINDS]
    chosen: set[int] = set()
    used = 0
    # When fitting has taken the user block down to nothing, markers go too (the budget must be met).
    marker_room = keep.user_budget > 0 or keep.retain_last > 0
    for rank, i in enumerate(reversed(candidates)):
        cost = part.tokens[i]
        if marker_room and TURN_ABORTED_MARKER in messages[i].text and cost <= MARKER_MAX_TOKENS:
            chosen.add(i)
        elif rank < keep.retain_last or used + cost <= keep.user_budget:
            chosen.add(i)
            used += cost
    return sorted(chosen)
