"""Keeping a ContextManager in step with a framework's own history, adding only what is new.

Agent frameworks hand their adapters the whole history before every model call. The manager must see each message
once (``add`` truncates big tool outputs and counts tokens per new message), so an adapter remembers the history
it saw last and adds only the part after it. When the framework's history no longer starts with what was seen
(a new run with other input, a history edited by someone else), the manager's view is archived and rebuilt from
the framework's history: nothing is lost, and the view matches what the framework holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..messages import Message

__all__ = ["REPLACED_REASON", "HistoryMirror"]

T = TypeVar("T")

# The reason recorded with the MessagesPruned event when the framework's history diverged and the view was rebuilt.
REPLACED_REASON = "framework_history_replaced"


class HistoryMirror(Generic[T]):
    """The framework history a manager has been fed, and the logic that feeds it only the new part.

    Args:
        manager: The session's manager.
        same: Whether two framework items are the same item (identity is tried first; defaults to ``==``).
    """

    def __init__(self, manager: ContextManager, same: Callable[[T, T], bool] | None = None) -> None:
        self.manager = manager
        self._same = same or (lambda a, b: a == b)
        self.known: list[T] = []
        self.rebuilds = 0

    def extends_known(self, items: Sequence[T]) -> bool:
        """Whether ``items`` starts with the history seen last (the usual case: the framework only appends)."""
        known = self.known
        if len(items) < len(known):
            return False
        same = self._same
        # O(history) comparisons, but of items the framework reuses: identity or equal strings short-circuit.
        return all(a is b or same(a, b) for a, b in zip(known, items, strict=False))

    def sync(self, items: Sequence[T], convert: Callable[[Sequence[T]], list[Message]],
             before_add: Callable[[Sequence[T]], None] | None = None) -> int:
        """Add the items the manager has not seen; returns how many framework items were new.

        ``convert`` turns framework items into Messages; ``before_add`` sees the new items first (adapters record
        the usage a new reply carries, which describes the request made with the view as it is now; not called when
        the view is rebuilt, as that usage describes another view).
        """
        if self.extends_known(items):
            fresh = list(items[len(self.known):])
            if fresh and before_add is not None:
                before_add(fresh)
        else:
            self.manager.rewrite_view(lambda _view: [], reason=REPLACED_REASON)
            self.rebuilds += 1
            fresh = list(items)
        if fresh:
            self.manager.add(convert(fresh))
        self.known = list(items)
        return len(fresh)

    def rebase(self, items: Sequence[T]) -> None:
        """The framework now holds ``items`` (the adapter replaced its history with the manager's view)."""
        self.known = list(items)
