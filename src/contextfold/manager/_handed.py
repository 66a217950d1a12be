"""The list ``prepare()`` returns, reused when the caller has let go of the last one, so a turn costs O(new messages).

A fresh list of a 100,000-message view costs about 0.6 ms to fill and 0.4 ms to free (one reference count written
in each of 100,000 objects spread over the heap), more than the rest of a no-op ``prepare()`` (issue 22). Handing out
one list and changing it in place would break two kinds of callers: one that keeps last turn's list (it must not
change under it), and one that changes the list it was given (what it changed must not reach the next request).

:class:`HandedList` keeps a private *shadow* of what it handed out (never given to anyone) and reuses the handed list
only when both hold:

- nothing but this object refers to it (CPython's reference count: a caller that keeps it anywhere — a variable, a
  frame, a queue, an iterator over it — holds a reference), so changing it in place cannot be seen by anyone;
- it was not changed while the caller had it. The list handed out is a :class:`Handed`, a ``list`` whose every
  changing method and operator (item and slice assignment, ``del``, ``+=``, ``*=``, ``append``, ``extend``,
  ``insert``, ``pop``, ``remove``, ``clear``, ``sort``, ``reverse``) notes that it changed before changing it; reading
  that note is O(1), where comparing the list with the shadow item for item (``list ==``, what this did before) read
  both arrays: 70-180 µs at 100,000 items, the one cost of a no-op ``prepare()`` that grew with the history. A change
  that bypasses the list's own type (``list.__setitem__(handed, ...)`` called on the base class, or C code writing the
  array directly) is not seen: the list is a ``list`` for every reader, and only writers that address ``list`` itself
  get past the note.

Otherwise the shadow is copied into a new :class:`Handed`, as before. Interpreters without exact reference counts
(PyPy, a free-threaded CPython) always get a new list. The shadow's first items stand for the settled prefix of the
view and stay as they are from call to call; the rest is the tail, replaced on every call.
"""

from __future__ import annotations

import sys
import sysconfig
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import pairwise
from typing import Any, Generic, SupportsIndex, TypeVar

__all__ = ["Handed", "HandedList"]

T = TypeVar("T")


class Handed(list[T]):
    """A ``list`` that notes whether it was changed (``changed``); copies, slices and pickles are plain lists."""

    __slots__ = ("changed",)

    def __init__(self, items: Iterable[T] = ()) -> None:
        super().__init__(items)
        self.changed = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))  # (a pickle or a copy.copy of it is a plain list: nothing to note there)

    def __setitem__(self, index: Any, value: Any) -> None:
        self.changed = True
        super().__setitem__(index, value)

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        self.changed = True
        super().__delitem__(index)

    def __iadd__(self, other: Iterable[T]) -> Handed[T]:  # type: ignore[override,misc]
        self.changed = True
        super().__iadd__(other)
        return self

    def __imul__(self, times: SupportsIndex) -> Handed[T]:
        self.changed = True
        super().__imul__(times)
        return self

    def append(self, item: T) -> None:
        self.changed = True
        super().append(item)

    def extend(self, items: Iterable[T]) -> None:
        self.changed = True
        super().extend(items)

    def insert(self, index: SupportsIndex, item: T) -> None:
        self.changed = True
        super().insert(index, item)

    def pop(self, index: SupportsIndex = -1) -> T:
        self.changed = True
        return super().pop(index)

    def remove(self, item: T) -> None:
        self.changed = True
        super().remove(item)

    def clear(self) -> None:
        self.changed = True
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self.changed = True
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self.changed = True
        super().reverse()


class HandedList(Generic[T]):
    """One list handed to callers call after call: a settled prefix kept, a tail replaced, reused when let go."""

    __slots__ = ("_handed", "_kept", "_marks", "_one_each", "_prefix", "_shadow", "_upto")

    def __init__(self, *, one_each: bool = False) -> None:
        """A list handed out again and again.

        ``one_each``: each message stands for at most one item, which ``prefix(i, i + 1)`` gives as it gave it among
        its neighbours (a format that encodes messages one by one; see :meth:`rewrite`).
        """
        self._one_each = one_each
        self._shadow: list[T] = []
        self._upto = 0  # the settled items of the view the shadow holds (in the view's own count)
        self._kept = 0  # shadow[:kept] stands for them (a message can encode to several items), the same every call
        self._handed: Handed[T] | None = None  # the list returned last (only read through _only_ours while held)
        # (settled, kept) at each point the prefix grew: where it may be cut back to (see rewind)
        self._marks: list[tuple[int, int]] = [(0, 0)]
        self._prefix: Callable[[int, int], Sequence[T]] | None = None  # the last hand()'s (see rewrite)

    def hand(self, settled: int, prefix: Callable[[int, int], Sequence[T]], tail: Sequence[T]) -> list[T]:
        """The list of ``prefix(0, settled)`` then ``tail``: the last one handed out when it was let go unchanged.

        ``prefix(start, end)`` gives what the settled messages ``start`` to ``end`` of the view stand for; it is asked
        only for those not kept since the last call. ``settled`` never goes down between two :meth:`reset` calls.
        """
        reusable = _REUSE and self._handed is not None and _only_ours(self) and not self._handed.changed
        self._prefix = prefix
        kept = self._kept
        shadow = self._shadow
        del shadow[kept:]
        if settled > self._upto:
            shadow.extend(prefix(self._upto, settled))
            self._upto = settled
            self._kept = len(shadow)
            self._marks.append((settled, self._kept))
        shadow.extend(tail)
        handed = self._handed
        if reusable and handed is not None:
            # (through list itself: this change is ours, not the caller's)
            list.__setitem__(handed, slice(kept, None), shadow[kept:])
        else:
            handed = Handed(shadow)
        self._handed = handed
        return handed

    def reset(self) -> None:
        """Forget the prefix (the view was rewritten); the next list is a new one."""
        self._shadow = []
        self._upto = self._kept = 0
        self._handed = None
        self._marks = [(0, 0)]
        self._prefix = None

    def rewind(self, changed: int) -> None:
        """Forget the prefix from settled message ``changed`` on (rewritten in place); what came before is kept.

        The prefix is cut back to the last point it grew at, at or before ``changed``: the pieces asked of
        ``prefix`` ended there, so asking again from there gives what asking from the start would. The next list
        is a new one (the handed list no longer stands for the shadow's prefix).
        """
        marks = self._marks
        while marks[-1][0] > changed:
            marks.pop()
        self._upto, self._kept = marks[-1]
        del self._shadow[self._kept:]
        self._handed = None

    def rewrite(self, changed: Collection[int]) -> None:
        """Ask ``prefix`` again for the pieces holding a changed settled message; keep the other pieces' items.

        A piece is what one call of ``prefix`` gave (between two points the prefix grew at): asking for it alone
        gives what it gave then, so a masking batch re-encodes the turns it changed, not everything after the first
        one (issue 22). With ``one_each``, a piece that gave one item per message has only the changed message's item
        asked again and put in its place (a masking turn re-encoded each masked output's call with it, and rebuilt
        the whole list piece by piece). The next list is a new one.
        """
        prefix = self._prefix
        if prefix is None:
            self.rewind(min(changed, default=self._upto))
            return
        marks, shadow = self._marks, self._shadow
        if self._one_each:
            changed = self._rewrite_in_place(changed, prefix)
        if changed:
            ordered = sorted(changed)
            rebuilt: list[T] = []
            points = [marks[0]]
            for (start, kept_start), (end, kept_end) in pairwise(marks):
                hit = bisect_left(ordered, start)
                if hit < len(ordered) and ordered[hit] < end:
                    rebuilt.extend(prefix(start, end))
                else:
                    rebuilt.extend(shadow[kept_start:kept_end])
                points.append((end, len(rebuilt)))
            self._shadow, self._marks = rebuilt, points
            self._kept = len(rebuilt)
        self._handed = None

    def _rewrite_in_place(self, changed: Collection[int], prefix: Callable[[int, int], Sequence[T]]) -> list[int]:
        """Put the item of each changed message in its place where its piece gave one item per message; the rest."""
        marks, shadow = self._marks, self._shadow
        left: list[int] = []
        for i in changed:
            piece = bisect_right(marks, (i, sys.maxsize)) - 1  # (the last point at or before i)
            if not 0 <= piece < len(marks) - 1:
                left.append(i)
                continue
            (start, kept_start), (end, kept_end) = marks[piece], marks[piece + 1]
            item = prefix(i, i + 1) if kept_end - kept_start == end - start else ()
            if len(item) == 1:
                shadow[kept_start + i - start] = item[0]
            else:
                left.append(i)  # (a message that gives no item now, or a piece that dropped one: asked again whole)
        return left


def _only_ours(holder: HandedList[T]) -> bool:
    return sys.getrefcount(holder._handed) <= _ALONE


def _calibrate() -> tuple[bool, int]:
    """Whether reference counts can tell a list nobody else holds, and the count such a list shows here.

    Measured with the very expression :func:`_only_ours` uses (interpreters differ in the temporary references a
    call holds); then checked: one more reference anywhere must show.
    """
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return False, 0
    probe: HandedList[int] = HandedList()
    probe._handed = Handed()
    alone = sys.getrefcount(probe._handed)
    held = probe._handed
    shows = sys.getrefcount(probe._handed) > alone
    del held
    return shows, alone


_REUSE, _ALONE = _calibrate()
