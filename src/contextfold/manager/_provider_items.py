"""The providers' state in a session's view: a part the :class:`~contextfold.manager.ContextManager` holds.

It remembers which providers' opaque items (reasoning, compaction items) the view may hold, so that a request in
another format reports what it leaves out (``provider.item_dropped``, once per message and format) at no cost in
the usual case; applies a provider compaction item as a boundary (what it replaced leaves the view, archived
first); and clears old reasoning as ``Policy.keep_thinking_turns`` says. The manager holds the lock and passes its
view, archiver and counter in (see :mod:`contextfold.provider_context` for the rules).
"""

from __future__ import annotations

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

        messages = view.normalized()
        fresh = [d for d in unreadable(messages, fmt)
                 if (str(messages[d.index].meta.get("id", d.index)), fmt) not in self._reported]
        if not fresh:
            return
        ids = tuple(dict.fromkeys(str(messages[d.index].meta.get("id", d.index)) for d in fresh))
        self._reported.update((i, fmt) for i in ids)
        self.tracer.emit(ProviderItemDropped(session_id=self.session_id, format=fmt, count=len(fresh),
                                             kinds=kinds(fresh), ids=ids,
                                             origins=tuple(sorted({d.origin or "unknown" for d in fresh}))))

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
        from ..provider_context import clear_old_reasoning
        from ._spans import MASK_KIND

        messages = view.normalized()
        cleared = clear_old_reasoning(messages, int(keep))
        if not cleared.parts:
            return
        count = counter.count_message
        freed = sum(count(messages[i]) - count(cleared.messages[i]) for i in cleared.indices)
        if freed < policy.clear_at_least and total() <= budgets.soft:
            return
        with self.tracer.span("compact.reasoning", kind=MASK_KIND, keep_turns=int(keep)) as span:
            archive(messages)
            view.replace(cleared.messages)
            span.set(cleared=cleared.parts, messages=len(cleared.indices), tokens_freed=freed)
