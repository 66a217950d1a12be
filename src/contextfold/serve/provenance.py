"""Which view messages each item a client sent became, and what a client that slides its window dropped.

Many chat UIs and agents keep their system prompt (maybe their task) and drop their oldest turns each request. The
client's request is the truth about what it wants sent: the proxy goes on with the session (its archive, output
cache, secret memory, summary) but drops from the view the messages of the items the client dropped, so that the
upstream request is never larger than what the client sent plus contextfold's own notes (a summary, placeholders).
Compaction and masking still apply to what remains.

That needs a map from the items fed to the messages of the view (the ``sources`` mark, parallel to the ``keys``
mark): each message a client item became gets an id of the turn that fed it and its ordinal in that turn
(``<prefix>:c<n>``), and the mark keeps, per fed item, the turn and the ordinals. Items the wire format merges
into one message (a Responses turn: reasoning, calls; an Anthropic user turn read after tool results) share it: such
a message leaves the view only when all of its items were dropped.

A slid window (:func:`slide_of`) is the one edit taken this way: the items fed, less one run of items after the
ones the client keeps at its head, the newest ``MIN_SLIDE_OVERLAP`` or more kept, new items after. Anything else
(an edited or reordered message, items dropped in two places) is not a slide: a session named by its opening forks
(a new session holding exactly what the client sent), a header-named one is rebuilt from the client's history
(the old view archived), as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CorruptRecord

if TYPE_CHECKING:
    from ..messages import Message

__all__ = ["MIN_SLIDE_OVERLAP", "SOURCES_MARK", "Sources", "decode_traced", "message_id",
           "slide_of"]

# The mark holding, per fed item, the turn that fed it and the ordinals of the messages it became.
SOURCES_MARK = "sources"
# Turns whose items all left (a sliding client's) kept in the mark before it is renumbered without them.
_UNUSED_BATCHES_KEPT = 32
# Items a slid window must keep of the newest the session was fed: one shared item is no evidence of one
# conversation (a "go on" two conversations both sent); a client that slides keeps a turn or more.
MIN_SLIDE_OVERLAP = 2


def message_id(prefix: str, ordinal: int) -> str:
    """The id of the ``ordinal``-th message a turn (its manager's id prefix) made of its client's items.

    ``c`` keeps them apart from the ids the manager numbers itself (``<prefix>:<n>``: retrieval rounds).
    """
    return f"{prefix}:c{ordinal}"


def slide_of(known: Sequence[str], keys: Sequence[str]) -> tuple[int, int] | None:
    """Where ``keys`` slid ``known``: ``(m, j)``, the client dropped ``known[m:j]``; None when it did not.

    A slide is ``keys == known[:m] + known[j:] + new`` with ``m < j`` and ``len(known) - j`` at least
    ``MIN_SLIDE_OVERLAP`` (an extension is no slide). The longest kept run wins (the smallest ``j``): what is
    dropped is never more than the client left out.
    """
    m = next((i for i, (a, b) in enumerate(zip(known, keys, strict=False)) if a != b), min(len(known), len(keys)))
    if m >= len(known) or m >= len(keys):
        return None
    first = keys[m]
    for j in range(m + 1, len(known) - MIN_SLIDE_OVERLAP + 1):
        if known[j] == first and list(known[j:]) == list(keys[m:m + len(known) - j]):
            return m, j
    return None


def decode_traced(decode: Callable[[Sequence[Mapping[str, Any]]], list[Message]],
                  items: Sequence[Mapping[str, Any]]) -> tuple[list[Message], list[list[int]]]:
    """``decode(items)``, and for each item the ordinals of the messages it became.

    Each item is decoded alone too, and items whose messages depend on their neighbour (merged into one message,
    or read differently after it) are decoded as one run whose items share its messages; the runs' messages must
    be ``decode(items)``'s exactly, else every item shares every message (one leaves the view only when all of
    them were dropped). A turn's items are few: the cost is two or three decodes of what is new.
    """
    whole = decode(items)
    n = len(items)
    if n <= 1:
        return whole, [list(range(len(whole)))] * n
    runs: list[tuple[int, int, list[Message]]] | None
    try:
        alone = [decode([item]) for item in items]
        runs = [(i, i + 1, ms) for i, ms in enumerate(alone)]
        if [m for ms in alone for m in ms] != whole:
            runs = _runs(decode, items, alone)
    except (ValueError, TypeError, KeyError):  # (an item that is no history on its own: the batch is one run)
        runs = None
    if runs is None or [m for _, _, ms in runs for m in ms] != whole:
        return whole, [list(range(len(whole)))] * n
    owners: list[list[int]] = []
    at = 0
    for start, end, ms in runs:
        ordinals = list(range(at, at + len(ms)))
        at += len(ms)
        owners.extend([ordinals] * (end - start))
    return whole, owners


def _runs(decode: Callable[[Sequence[Mapping[str, Any]]], list[Message]], items: Sequence[Mapping[str, Any]],
          alone: list[list[Message]]) -> list[tuple[int, int, list[Message]]]:
    """The runs of items read together, with their messages.

    Item ``i`` joins the run before it when ``decode(items[i-1:i+1])`` is not the two read alone.
    """
    runs: list[tuple[int, int, list[Message]]] = []
    start = 0
    for i in range(1, len(items) + 1):
        if i == len(items) or decode(items[i - 1:i + 1]) == [*alone[i - 1], *alone[i]]:
            runs.append((start, i, decode(items[start:i]) if i - start > 1 else alone[start]))
            start = i
    return runs


@dataclass
class Sources:
    """Per fed item (in the order of the ``keys`` mark): the turn that fed it, and its messages' ordinals there."""

    batches: list[str] = field(default_factory=list)  # the id prefixes of the turns
    items: list[list[int]] = field(default_factory=list)  # per item: [batch index, ordinal, ordinal, …]

    @classmethod
    def read(cls, marks: Mapping[str, str], place: str, count: int) -> Sources | None:
        """The mark (``place`` names it in an error), or None when absent or not of ``count`` items."""
        raw = marks.get(SOURCES_MARK)
        if not raw:
            return None  # (never saved, or set aside: a session saved before the mark existed slides as before)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            raise CorruptRecord(f"{place}: not JSON (not saved by the proxy)") from None
        root, batches, items = (data.get("root", ""), data.get("batches"), data.get("items")) \
            if isinstance(data, dict) else (None, None, None)
        if not (isinstance(root, str) and isinstance(batches, list) and all(isinstance(b, str) for b in batches)
                and isinstance(items, list) and _item_lists(items, len(batches))):
            raise CorruptRecord(f"{place}: no map of fed items to messages (not saved by the proxy)")
        return cls([root + b for b in batches], items) if len(items) == count else None

    def ids(self, start: int, end: int) -> set[str]:
        """The ids of the messages items ``start:end`` became."""
        return {message_id(self.batches[i[0]], n) for i in self.items[start:end] for n in i[1:]}

    def dropped(self, start: int, end: int) -> set[str]:
        """The ids of the messages only items ``start:end`` became (a message shared with a kept item stays)."""
        kept = self.ids(0, start) | self.ids(end, len(self.items))
        return self.ids(start, end) - kept

    def without(self, start: int, end: int) -> None:
        """Forget items ``start:end``."""
        del self.items[start:end]

    def extend(self, prefix: str, owners: Sequence[Sequence[int]]) -> None:
        """Items fed by the turn of id prefix ``prefix``: ``owners`` are their messages' ordinals there."""
        if not owners:
            return
        self.batches.append(prefix)
        batch = len(self.batches) - 1
        self.items.extend([batch, *o] for o in owners)

    def claim_for_newest(self, count: int) -> list[str]:
        """Ids for ``count`` messages the proxy adds after the newest item (a retrieval round), owned by that item.

        They leave the view with it: a round the model made to answer a request goes when the client drops that
        request. Numbered after the ordinals the item's turn used.
        """
        newest = self.items[-1]
        batch = newest[0]
        used = max((n for item in self.items if item[0] == batch for n in item[1:]), default=-1)
        ordinals = list(range(used + 1, used + 1 + count))
        self.items[-1] = [*newest, *ordinals]
        return [message_id(self.batches[batch], n) for n in ordinals]

    def dumps(self) -> str:
        """The mark's value: the turns no item names left out, what every turn's prefix opens with written once."""
        items: list[list[int]] = self.items
        batches = self.batches
        used = sorted({i[0] for i in items})
        if len(batches) - len(used) > _UNUSED_BATCHES_KEPT:  # (pruned now and then, not at every save)
            renumber = {old: new for new, old in enumerate(used)}
            batches = [batches[b] for b in used]
            items = [[renumber[i[0]], *i[1:]] for i in items]
        root = batches[0].partition(":")[0] + ":" if batches else ""  # (the session's id: every turn's is)
        if not all(b.startswith(root) for b in batches):
            root = ""
        return json.dumps({"root": root, "batches": [b[len(root):] for b in batches], "items": items},
                          separators=(",", ":"))


def _item_lists(items: list[Any], batches: int) -> bool:
    """Whether ``items`` are lists of a batch index under ``batches`` and ordinals (ints, not negative)."""
    for item in items:
        if type(item) is not list or not item:
            return False
        for n in item:
            if type(n) is not int or n < 0:
                return False
        if item[0] >= batches:
            return False
    return True
