"""The providers' state in a session's view: a part the :class:`~contextfold.manager.ContextManager` holds.

It remembers which providers' opaque items (reasoning, compaction items) the view may hold, so that a request in
another format reports what it leaves out (``provider.item_dropped``, once per message and format) at no cost in
the usual case; applies a provider compaction item as a boundary (what it replaced leaves the view, archived
first); and clears old reasoning as ``Policy.keep_thinking_turns`` says. The manager holds the lock and passes its
view, archiver and counter in (see :mod:`contextfold.provider_context` for the rules).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..compaction import Budgets, Policy
    from ..messages import Message
    from ..telemetry import Tracer
    from ..tokens import MessageCounter
    from ._view import View

__all__ = ["ProviderItems"]


class ProviderItems:
    """Provider state in one session's view (see the module).

    Args:
        tracer: Where the events go.
        session_id: Names the session in them.
    """

    def __init__(self, tracer: Tracer, session_id: str) -> None:
        self.tracer = tracer
        self.session_id = session_id
        self.origins: set[str] = set()  # formats whose reasoning or compaction items the view may hold ("?": none)
        self._reported: set[tuple[str, str]] = set()  # (message id, format) whose drops were reported
        self._reasoning: _OldReasoning | None = None  # where the view's reasoning is (keep_thinking_turns only)
        self._drops_read: dict[str, tuple[int, int]] = {}  # format -> (view version, settled messages read)

    def note(self, messages: Iterable[Message]) -> None:
        """Remember the origins of the reasoning and compaction items of ``messages`` (cheap: parts only)."""
        from ..formats.opaque import origin
        from ..messages import ThinkingPart, is_compaction

        for m in messages:
            if not isinstance(m.content, str):
                self.origins.update(origin(p) or "?" for p in m.content
                                    if isinstance(p, ThinkingPart) or is_compaction(p))

    def drop_before_boundary(self, view: View, archive: Callable[[list[Message]], Any]) -> bool:
        """Apply the latest provider compaction item of ``view``: what it replaced leaves, archived first.

        Returns whether anything left (the caller forgets what it knew of the old view's size).
        """
        from ..provider_context import drop_before_boundary
        from ..telemetry import MessagesPruned

        kept, removed = drop_before_boundary(list(view.raw))
        if not removed:
            return False
        archive(view.normalized())
        view.replace(kept)
        self.tracer.emit(MessagesPruned(session_id=self.session_id, count=len(removed),
                                        ids=tuple(str(m.meta.get("id", "")) for m in removed),
                                        kept={"provider_compaction": len(kept)}))
        return True

    def report_drops(self, view: View, fmt: str) -> None:
        """Say what a request in ``fmt`` leaves out of ``view``: other providers' state it cannot read."""
        if self.origins <= {fmt}:
            return  # the usual case: every item came from the provider being called
        from ..formats.opaque import kinds, unreadable
        from ..telemetry import ProviderItemDropped

        # The settled prefix is read once per version of the view (its parts were reported when first read), the
        # tail on every call: a view holding reasoning is not read whole on every call (issue 22).
        start, tail = view.tail()
        version, read = self._drops_read.get(fmt, (-1, 0))
        read = read if version == view.version else 0
        raw = view.raw
        found = [(d, raw[read + d.index], read + d.index) for d in unreadable(raw[read:start], fmt)]
        found += [(d, tail[d.index], start + d.index) for d in unreadable(tail, fmt)]
        self._drops_read[fmt] = (view.version, start)
        fresh = [(d, str(m.meta.get("id", index))) for d, m, index in found]
        fresh = [(d, key) for d, key in fresh if (key, fmt) not in self._reported]
        if not fresh:
            return
        ids = tuple(dict.fromkeys(key for _, key in fresh))
        self._reported.update((i, fmt) for i in ids)
        dropped = [d for d, _ in fresh]
        self.tracer.emit(ProviderItemDropped(session_id=self.session_id, format=fmt, count=len(dropped),
                                             kinds=kinds(dropped), ids=ids,
                                             origins=tuple(sorted({d.origin or "unknown" for d in dropped}))))

    def clear_old_reasoning(self, view: View, *, policy: Policy, budgets: Budgets, counter: MessageCounter,
                            total: Callable[[], int], archive: Callable[[list[Message]], Any]) -> None:
        """Clear the reasoning of turns older than ``policy.keep_thinking_turns``, in batches (see below).

        A cleared block changes the prompt from there on (the provider's cache is lost from it), so, like masking,
        it waits until ``clear_at_least`` tokens can go or the view (``total()`` tokens) is over soft. The view is
        archived first: nothing is lost.
        """
        keep = policy.keep_thinking_turns
        if keep == "all" or not self.origins:
            return
        # What clearing would free is read from what is kept with the view, not from a copy of it (issue 22): most
        # calls have nothing old to clear, or wait for clear_at_least.
        if self._reasoning is None:
            self._reasoning = _OldReasoning()
        freed = self._reasoning.freed(view, int(keep), counter)
        if freed is None or (freed < policy.clear_at_least and total() <= budgets.soft):
            return
        if counter.provisional:  # byte upper bounds said "clear": only exact counts may decide it
            counter.wait_exact()
            freed = self._reasoning.freed(view, int(keep), counter)
            if freed is None or (freed < policy.clear_at_least and total() <= budgets.soft):
                return
        from ..provider_context import clear_old_reasoning
        from ._spans import MASK_KIND

        messages = view.normalized()
        cleared = clear_old_reasoning(messages, int(keep))
        with self.tracer.span("compact.reasoning", kind=MASK_KIND, keep_turns=int(keep)) as span:
            archive(messages)
            # Only the cleared messages change: the view keeps what it knows of the rest (a message left empty
            # leaves the view, which then normalizes it again).
            view.rewrite({i: cleared.messages[i] for i in cleared.indices})
            span.set(cleared=cleared.parts, messages=len(cleared.indices), tokens_freed=freed)


class _OldReasoning:
    """Where the reasoning of a view's settled prefix is and what clearing it frees, kept as the prefix grows.

    ``clear_old_reasoning`` of the whole view answers the same (the manager's property test checks it), but reads and
    copies every message; this reads each settled message once per version of the view, and the tail on each call.
    """

    def __init__(self) -> None:
        self._version = -1  # the view's version and the counter's revision what is kept was read at
        self._revision = -1
        self._scanned = 0  # settled messages read
        self._starts: list[int] = []  # indices of the settled messages that open a turn
        self._at: list[int] = []  # indices of the settled messages holding reasoning, ascending
        self._freed: list[int] = [0]  # _freed[k]: tokens clearing the reasoning of _at[:k] frees

    def _reset(self, version: int, revision: int) -> None:
        self._version, self._revision = version, revision
        self._scanned = 0
        self._starts, self._at, self._freed = [], [], [0]

    def freed(self, view: View, keep_turns: int, counter: MessageCounter) -> int | None:
        """Tokens clearing the reasoning older than the last ``keep_turns`` turns frees; None when there is none."""
        from ..provider_context.reasoning import holds_reasoning, in_tool_loop, opens_turn, without_reasoning

        start, tail = view.tail()
        revision = counter.revision
        if view.version != self._version or revision != self._revision:
            self._reset(view.version, revision)
        count = counter.count_message
        raw = view.raw
        for i in range(self._scanned, start):
            m = raw[i]
            if opens_turn(m):
                self._starts.append(i)
            elif holds_reasoning(m):
                self._at.append(i)
                self._freed.append(self._freed[-1] + count(m) - count(without_reasoning(m)))
        self._scanned = max(self._scanned, start)
        # reasoning_turns(view, keep_turns), with the settled prefix's turn starts kept
        looping = in_tool_loop(reversed(tail))
        if looping is None:
            looping = bool(in_tool_loop(raw[i] for i in range(start - 1, -1, -1)))
        keep = max(keep_turns, 1) if looping else keep_turns
        tail_starts = [start + k for k, m in enumerate(tail) if opens_turn(m)]
        if keep <= 0:
            since = start + len(tail)
        elif len(tail_starts) >= keep:
            since = tail_starts[-keep]
        elif len(self._starts) >= keep - len(tail_starts):
            since = self._starts[len(self._starts) - (keep - len(tail_starts))]
        else:
            since = 0
        settled = bisect.bisect_left(self._at, since)
        old_tail = [m for k, m in enumerate(tail) if start + k < since and holds_reasoning(m)]
        if not settled and not old_tail:
            return None
        return self._freed[settled] + sum(count(m) - count(without_reasoning(m)) for m in old_tail)
