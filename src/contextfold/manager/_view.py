"""The in-context view, kept normalized, counted and encoded incrementally.

``prepare()`` must cost O(new messages), not O(history) (DESIGN.md principle 6). The view keeps a *settled
prefix*: messages already normalized, every call in them answered inside them, ending right before an assistant
message. Only the tail after it is normalized, counted and encoded on each call; the prefix's token total and its
encodings per wire format are kept. Anything that rewrites the middle (masking, compaction) resets the prefix.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

from ..answered import answered_indices
from ..messages import Message
from ..pairing import BOUNDARY_KIND, ToolPair, normalize, pair_list
from ..tokens import MessageCounter
from ._handed import HandedList

__all__ = ["View"]

_PINNED_ROLES = frozenset({"system", "developer"})
# A first settle at least this long checks the segment before normalizing it (see View._settle): below it,
# normalizing costs less than loading the compaction module that checks.
CHECK_FIRST_MIN_MESSAGES = 10_000
# The formats that encode each message alone, into at most one item (Chat Completions: one dict per message): a
# rewrite re-encodes only the changed messages. The others may give one message several items (Responses: a turn's
# function calls) or merge neighbours: the turns holding a change are encoded again.
_ONE_ITEM_EACH = frozenset({"openai_chat"})
# Wires whose encoding of a message depends on the messages before it, so that pieces encoded apart are not the
# whole's: Anthropic names a call reusing an earlier call's id after the calls before it (_call_ids.UniqueCallIds).
_ENCODED_WHOLE = frozenset({"anthropic"})
# Messages encoded ahead (View.encode_ahead) kept at most: those never masked are dropped together beyond it.
_AHEAD_MAX = 512
# normalize() gives a call with no result a synthetic output of this kind (see ensure_call_outputs_present).
_ABORTED_KIND = "aborted_output"
_META_OF = operator.attrgetter("meta")
# Kinds normalization reads (a rewrite that adds or removes one goes through replace()).
_PLAIN_KINDS = frozenset({_ABORTED_KIND, BOUNDARY_KIND})


# A message's role, read at C speed.
_ROLE_OF = operator.attrgetter("role")


class View:
    """The messages the model sees, with incremental totals. Not thread-safe: the manager holds the lock."""

    def __init__(self, counter: MessageCounter) -> None:
        self.counter = counter
        self._messages: list[Message] = []
        self.version = 0  # bumps whenever something other than an append changes the view
        self._appends = 0  # bumps on every append (settling may drop as many messages as one adds)
        # Bumps when settling changes stored messages (drops an orphan or a duplicate, inserts an "aborted" output):
        # what counts the stored messages incrementally (the media tally) starts again then. (Not ``version``: the
        # settled prefix's caches stay valid through it.)
        self.settle_edits = 0
        # Rewrites that changed only text-only messages into text-only ones (masking's): ``version`` bumps for them,
        # ``media_version`` does not (issue 22: the media tally was recounted over the whole view after every masking).
        self._media_kept = 0
        self._settled = 0  # view[:settled] is normalized, closed, and ends before an assistant message
        # (version, appends, length) when the settled boundary was last moved up as far as it goes (see _settle)
        self._settled_at: tuple[int, int, int] | None = None
        # Every message passed check_messages: add() and rewrite_view() check each, and the view's own rewrites
        # (masking, compaction, answered outputs narrowed) make valid messages of valid ones; adopt() checks a
        # caller's messages as add() does. Planning then does not check the view again (issue 22: ~40 ms of the
        # first prepare() of 100,000 recorded messages).
        self.checked = True
        self._settled_tokens = 0
        self._settled_tool_tokens = 0
        self._settled_pinned = {"system": 0, "developer": 0}
        self._opened = False  # the settled prefix holds a non-system message
        self._settled_last_user = -1  # index of the latest user message in the settled prefix (-1: none)
        # What masking reads of every message, kept with the prefix instead of derived anew on each masking turn
        # (issue 22): each settled message's tokens, and the prefix's call/result pairs. The prefix is closed (its
        # calls are answered inside it), so the pairs of the whole view are these, then the tail's shifted.
        self._settled_counts: list[int] = []
        self._settled_pairs: list[ToolPair] = []
        # wire format -> its encodings of the settled prefix, in the list prepare() last returned (see _handed)
        self._encoded: dict[str, HandedList[dict[str, Any]]] = {}
        self._handed_messages: HandedList[Message] = HandedList(one_each=True)
        # The wire formats encoded so far, and messages encoded ahead for them, alone, by (format, id(message)): the
        # masked messages the read-ahead built, which a masking's rewrite puts in place of one item (see encode_ahead).
        self._wires: dict[str, Any] = {}
        self._ahead: dict[tuple[str, int], tuple[Message, dict[str, Any]]] = {}
        self._call_ids: Counter[str] = Counter()  # ids of the tool calls in the view, to spot orphans on arrival
        self.dropped: list[Message] = []  # messages normalization removed for good, not yet archived
        self._tail_cache: tuple[tuple[int, int, int, int], list[Message]] | None = None
        # (the normalized tail counted, the counter revision it was counted with, its totals, each message's tokens)
        self._tail_counts: tuple[list[Message], int, tuple[int, int, int, int], list[int]] | None = None
        # call id -> synthetic "aborted" outputs stored in the view (a late real result takes one's place)
        self._aborted: dict[str, list[Message]] = {}
        # The counter's revision the settled totals were counted with: a lazy counter whose exact tokenizer just
        # arrived (or a recalibrated estimate) makes them stale, and they are counted again once.
        self._counted_revision = getattr(counter, "revision", 0)

    # -- reading ------------------------------------------------------------------------------------------------------
    @property
    def raw(self) -> list[Message]:
        """The stored messages (the tail not yet normalized). Do not mutate."""
        return self._messages

    @property
    def media_version(self) -> int:
        """Like ``version``, but not bumped by a rewrite that changed no message's media (nor their places)."""
        return self.version - self._media_kept

    def __len__(self) -> int:
        return len(self._messages)

    def normalized(self) -> list[Message]:
        """The view as it would be sent: settled prefix plus the normalized tail."""
        self._settle()
        settled, tail = self._settled, self._normalized_tail()
        if settled + len(tail) > len(self._messages):  # normalization added messages (synthetic results)
            return self._messages[:settled] + tail
        # One allocation of the final size (a slice then "+" or extend() would hold two buffers for a moment).
        out = self._messages[: settled + len(tail)]
        out[settled:] = tail
        return out

    def totals(self) -> tuple[int, int, int]:
        """(tokens, tool-output tokens, message count) of :meth:`normalized`, counting only the tail anew."""
        tail, (tokens, tool, _, _) = self._tail_totals()
        return self._settled_tokens + tokens, self._settled_tool_tokens + tool, self._settled + len(tail)

    def pinned_tokens(self) -> tuple[int, int]:
        """(system, developer) tokens of :meth:`normalized`, for the token-estimate breakdown."""
        _, (_, _, system, developer) = self._tail_totals()
        return self._settled_pinned["system"] + system, self._settled_pinned["developer"] + developer

    def tail(self) -> tuple[int, list[Message]]:
        """(where the tail starts in :meth:`normalized`, the normalized tail): what changed since the prefix settled.

        O(tail): the tail starts at the latest assistant message (or holds the whole view when there is none).
        Do not mutate the list.
        """
        self._settle()
        return self._settled, self._normalized_tail()

    def answered(self) -> tuple[int, ...]:
        """``answered_indices(self.normalized())``, read from the tail and the prefix's latest user message only."""
        start, tail = self.tail()
        if all(m.role in _PINNED_ROLES for m in tail):
            # The latest message that is not a system prompt is in the prefix (the tail's assistant message was
            # empty and normalization dropped it): rare, read the whole view.
            return answered_indices(self.normalized()) if start else ()
        # The latest non-system message is in the tail; so are the calls of any result there (the prefix's calls are
        # answered inside it), and any user message there is later than the prefix's.
        found = answered_indices(tail)
        if found:
            return tuple(start + i for i in found)
        return (self._settled_last_user,) if self._settled_last_user >= 0 else ()

    def counts(self) -> list[int]:
        """The tokens of each message of :meth:`normalized`, as the counter counts them; only the tail counted anew."""
        tail, _ = self._tail_totals()
        memo = self._tail_counts
        assert memo is not None and memo[0] is tail
        return [*self._settled_counts, *memo[3]]

    def pairs(self) -> list[ToolPair]:
        """``pair_list(self.normalized())``: the settled prefix's pairs are kept, only the tail is paired anew."""
        start, tail = self.tail()
        return [*self._settled_pairs, *_shifted(pair_list(tail), start)]

    def prefix_pairs(self) -> int:
        """How many of :meth:`pairs` are the settled prefix's: they change only with :attr:`version` (and grow)."""
        self._settle()
        return len(self._settled_pairs)

    def prefix_pairs_from(self, start: int) -> list[ToolPair]:
        """The settled prefix's pairs from the ``start``-th on (the first :meth:`prefix_pairs` of :meth:`pairs`)."""
        self._settle()
        return self._settled_pairs[start:]

    def encoded(self, wire: Any, extra: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        """The normalized view in ``wire``'s list form, then ``extra``; the settled prefix is encoded once and reused.

        The dicts of the settled prefix are shared between calls: callers must not mutate them. The messages
        after the latest assistant turn (where one adds ``cache_control``) are fresh dicts on every call. The list
        is the one returned last time when the caller let go of it unchanged (:mod:`._handed`), a new one otherwise.

        Boundaries sit right before assistant messages, where no format merges a message with its neighbour, so
        encoding the prefix and the tail apart gives the same list as encoding the whole. A wire that names a
        message after the ones before it (Anthropic: ids used again) is encoded whole, a new list every call.
        """
        if wire.NAME in _ENCODED_WHOLE:
            whole: list[dict[str, Any]] = wire.encode(self.normalized())
            whole.extend(extra)
            return whole
        self._settle()
        handed = self._encoded.get(wire.NAME)
        if handed is None:
            handed = self._encoded[wire.NAME] = HandedList(one_each=wire.NAME in _ONE_ITEM_EACH)
            if wire.NAME in _ONE_ITEM_EACH:
                self._wires[wire.NAME] = wire
        tail: list[dict[str, Any]] = wire.encode(self._normalized_tail())
        if extra:
            tail.extend(extra)
        return handed.hand(self._settled, partial(self._piece, wire), tail)

    def _piece(self, wire: Any, start: int, end: int) -> list[dict[str, Any]]:
        """``wire.encode`` of the stored messages ``start`` to ``end``; one message encoded ahead is taken as it is."""
        if end - start == 1 and self._ahead:
            m = self._messages[start]
            found = self._ahead.pop((wire.NAME, id(m)), None)
            if found is not None and found[0] is m:
                return [found[1]]
        encoded: list[dict[str, Any]] = wire.encode(self._messages[start:end])
        return encoded

    def encode_ahead(self, messages: Iterable[Message]) -> None:
        """Count ``messages`` and encode each alone in the formats encoded so far that give one item a message.

        For the background read-ahead: the masked messages it built (``cache.masking.placeholder_ahead``), which a
        masking turn's rewrite then finds counted and encoded (issue 22: counting and encoding each masked output
        were ~10 us of the turn's ~45 an output). An encoding is taken once, by the message itself; never changed.
        """
        if len(self._ahead) > _AHEAD_MAX:
            self._ahead.clear()  # (the outputs a session ended before masking: a quarter of those read ahead)
        for m in messages:
            self.counter.count_message(m)
            for name, wire in list(self._wires.items()):
                items = wire.encode([m])
                if len(items) == 1:
                    self._ahead[(name, id(m))] = (m, items[0])

    def handed(self) -> list[Message]:
        """:meth:`normalized` for a caller to keep or change: the one returned last time when it was let go unchanged.

        The messages are the view's own (immutable); the list is the caller's until its next call.
        """
        self._settle()
        return self._handed_messages.hand(self._settled, lambda start, end: self._messages[start:end],
                                          self._normalized_tail())

    # -- writing ------------------------------------------------------------------------------------------------------
    def append(self, messages: Iterable[Message]) -> None:
        """Add messages at the end (the settled prefix and its caches stay valid).

        A result that arrives after the agent moved on takes the place of the synthetic "aborted" output its call
        was given (that rewrites the middle, so the settled prefix is reset); otherwise it would be an orphan,
        dropped by normalization and lost.
        """
        incoming = list(messages)
        if self.answers_late(incoming):
            incoming = self._answer_late(incoming)
        self._count_calls(incoming)
        self._messages.extend(incoming)
        self._appends += 1

    def answers_late(self, messages: Sequence[Message]) -> bool:
        """Whether appending ``messages`` puts a result in place of a synthetic "aborted" output (:meth:`append`)."""
        aborted = self._aborted
        return bool(aborted) and any(m.role == "tool" and m.tool_call_id in aborted for m in messages)

    def split_orphans(self, incoming: Sequence[Message]) -> tuple[list[Message], list[Message]]:
        """(messages to append, results that answer no call in the view or in ``incoming``).

        A result whose call was compacted away would only be dropped by normalization: the caller archives it.
        """
        orphans: list[int] = []
        batch_calls: set[str] = set()
        called, view_calls = batch_calls.add, self._call_ids
        # (roles read at C speed, the calls added one by one: a bulk add of 100,000 messages, issue 22)
        for i, (m, role) in enumerate(zip(incoming, map(_ROLE_OF, incoming), strict=True)):
            if role == "assistant":
                for call in m.tool_calls:
                    called(call.id)
            elif role == "tool" and m.tool_call_id not in batch_calls and not view_calls[m.tool_call_id or ""]:
                orphans.append(i)
        if not orphans:
            return list(incoming), []
        gone = set(orphans)
        return [m for i, m in enumerate(incoming) if i not in gone], [incoming[i] for i in orphans]

    def _count_calls(self, messages: Iterable[Message]) -> None:
        # (one update of a list: an update per message, of a generator, was ~5x slower for a bulk add, issue 22)
        self._call_ids.update([c.id for m in messages if m.role == "assistant" for c in m.tool_calls])

    def replace(self, messages: Sequence[Message], *, checked: bool = False) -> None:
        """Replace the whole view (after masking or compaction); totals and encodings are rebuilt lazily.

        ``checked``: every message of ``messages`` passed ``check_messages`` (see :attr:`checked`).
        """
        self.checked = checked
        self._messages = list(messages)
        self._aborted = {}
        self._track_aborted(self._messages)
        self._call_ids = Counter()
        self._count_calls(self._messages)
        self._reset()

    def rewrite(self, changes: dict[int, Message]) -> None:
        """Put ``changes[i]`` in place of message ``i`` of :meth:`normalized` (masking's placeholders, cleared inputs).

        When every change is in the settled prefix and keeps its message's shape (role, result's call id, call ids
        and names, content that is not empty), the prefix stays normalized and paired as it was: its totals are
        adjusted and its encodings kept up to the first change, so a masking turn does not normalize, count and
        encode the whole view again (issue 22). Any other change replaces the view (:meth:`replace`).
        """
        if not changes:
            return
        self._recount_if_stale()
        self._settle()
        msgs = self._messages
        if not all(0 <= i < self._settled and _same_shape(msgs[i], m) for i, m in changes.items()):
            view = self.normalized()
            for i, m in changes.items():
                view[i] = m
            self.replace(view, checked=self.checked)
            return
        count = self.counter.count_message
        text_only = all(_text_only(msgs[i]) and _text_only(m) for i, m in changes.items())
        for i, m in changes.items():
            n = count(m)
            delta = n - self._settled_counts[i]
            self._settled_counts[i] = n
            self._settled_tokens += delta
            if m.role == "tool":
                self._settled_tool_tokens += delta
            msgs[i] = m
        # The tail is normalized from itself alone and whether the view opened, which a change of the same shape
        # keeps: its normalization (and so its counts) stand for the new version (issue 22: counted again per batch).
        cached, key = self._tail_cache, (self.version, self._appends, len(msgs), self._settled)
        self.version += 1
        self._media_kept += text_only
        self._tail_cache = ((self.version, *key[1:]), cached[1]) if cached is not None and cached[0] == key else None
        # Only the turns holding a change are encoded again (the others keep their dicts).
        for handed in self._encoded.values():
            handed.rewrite(changes)
        self._handed_messages.rewrite(changes)

    def tail_start(self) -> int:
        """Index of the first message after the settled prefix (what :meth:`replace_at` rewrites cheaply)."""
        return self._settled

    def replace_at(self, index: int, message: Message) -> None:
        """Put ``message`` in place of the stored message at ``index`` (same role and call id).

        In the unsettled tail only the tail's caches go; in the settled prefix the prefix is reset (O(history)).
        """
        self._messages[index] = message
        if index < self._settled:
            self._reset()
        else:
            self._tail_cache = None

    def _reset(self) -> None:
        self.version += 1
        self._settled = 0
        self._settled_tokens = 0
        self._settled_tool_tokens = 0
        self._settled_pinned = {"system": 0, "developer": 0}
        self._opened = False
        self._settled_last_user = -1
        self._settled_counts = []
        self._settled_pairs = []
        self._encoded.clear()
        self._handed_messages.reset()

    # -- internals ----------------------------------------------------------------------------------------------------
    def _recount_if_stale(self) -> None:
        revision = getattr(self.counter, "revision", 0)
        if revision == self._counted_revision:
            return
        self._counted_revision = revision
        settled = self._messages[: self._settled]
        count = self.counter.count_message
        self._settled_tokens = self._settled_tool_tokens = 0
        self._settled_pinned = {"system": 0, "developer": 0}
        self._settled_counts = []
        for m in settled:
            n = count(m)
            self._settled_counts.append(n)
            self._settled_tokens += n
            if m.role == "tool":
                self._settled_tool_tokens += n
            elif m.role in self._settled_pinned:
                self._settled_pinned[m.role] += n

    def _track_aborted(self, messages: Sequence[Message]) -> None:
        # (only the messages whose meta holds a kind are looked at, found by C loops: the first settle of a bulk add
        # reads 100,000 messages here, most without one; ``m.kind`` of each was ~20-30 ms, issue 22)
        for m in itertools.compress(messages, map(operator.contains, map(_META_OF, messages),
                                                  itertools.repeat("kind"))):
            if m.kind == _ABORTED_KIND and m.tool_call_id:
                known = self._aborted.setdefault(m.tool_call_id, [])
                if not any(k is m for k in known):
                    known.append(m)

    def _answer_late(self, incoming: list[Message]) -> list[Message]:
        """Put late results in place of their calls' "aborted" outputs; the messages still to append."""
        rest: list[Message] = []
        for k, m in enumerate(incoming):
            call_id = m.tool_call_id or ""
            placeholders = self._aborted.get(call_id) if m.role == "tool" else None
            # A call in the unsettled tail (or earlier in this batch) still waiting for this id gets it instead.
            if not placeholders or self._awaited(call_id, incoming[:k]):
                rest.append(m)
                continue
            old = placeholders.pop()  # ids reused across turns: the latest call is the one being answered
            if not placeholders:
                del self._aborted[call_id]
            index = next((i for i, x in enumerate(self._messages) if x is old), None)
            if index is None:
                rest.append(m)
                continue
            self._messages[index] = m
            self._reset()
        return rest

    def _awaited(self, call_id: str, before: list[Message]) -> bool:
        tail = [*self._messages[self._settled :], *before]
        return any(p.call_id == call_id and p.result_index is None for p in pair_list(tail))

    def _tail_totals(self) -> tuple[list[Message], tuple[int, int, int, int]]:
        """(the normalized tail, its (tokens, tool-output tokens, system, developer)), counted once per tail.

        prepare() reads the totals three times (the decision, the estimate, the span): the tail is counted once for
        each normalized tail (a new list whenever the tail changes) and counter revision.
        """
        self._recount_if_stale()
        self._settle()
        tail = self._normalized_tail()
        memo = self._tail_counts
        if memo is not None and memo[0] is tail and memo[1] == self._counted_revision:
            return tail, memo[2]
        count = self.counter.count_message
        tokens = tool = system = developer = 0
        each: list[int] = []
        for m in tail:
            n = count(m)
            each.append(n)
            tokens += n
            if m.role == "tool":
                tool += n
            elif m.role == "system":
                system += n
            elif m.role == "developer":
                developer += n
        totals = (tokens, tool, system, developer)
        self._tail_counts = (tail, self._counted_revision, totals, each)
        return tail, totals

    def _normalized_tail(self) -> list[Message]:
        # prepare() asks for the tail three times (totals, decision, encoding); normalize it once per state.
        key = (self.version, self._appends, len(self._messages), self._settled)
        cached = self._tail_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        tail = normalize(self._messages[self._settled :], opening=not self._opened)
        self._tail_cache = (key, tail)
        return tail

    def _settle(self) -> None:
        """Move the settled boundary up to the last assistant message, repairing that segment for good.

        A call before the latest assistant turn that still has no result will not get one (the agent moved on),
        so its synthetic "aborted" result is kept from now on.
        """
        msgs = self._messages
        state = (self.version, self._appends, len(msgs))
        if state == self._settled_at:
            return  # (nothing appended or rewritten since the last look: prepare() asks ~5 times a call)
        end = len(msgs) - 1
        while end > self._settled and msgs[end].role != "assistant":
            end -= 1
        if end <= self._settled:
            self._settled_at = state
            return
        segment = msgs[self._settled : end]
        if not self._opened and len(segment) >= CHECK_FIRST_MIN_MESSAGES:
            # A long opening segment (a resumed history's first settle) is most often normalized already: checked
            # against one pairing, normalized only if it is not (normalizing pairs it twice and copies it four
            # times). The same result as normalize(); loading the compaction module is little next to such a settle.
            from ..compaction._compact import normalized_with_pairs

            fixed, pairs = normalized_with_pairs(segment)
        else:
            fixed = normalize(segment, opening=not self._opened)
            pairs = pair_list(fixed)
        if fixed != segment:
            kept = {id(m) for m in fixed}
            # Orphans and duplicates leave the view here for good; the manager archives them (nothing is lost).
            self.dropped.extend(m for m in segment if id(m) not in kept)
            msgs[self._settled : end] = fixed
            self.settle_edits += 1
        self._track_aborted(fixed)
        start = self._settled
        self._settled_pairs.extend(_shifted(pairs, start))
        for k, (m, n) in enumerate(zip(fixed, self.counter.count_each(fixed), strict=True)):
            if m.role == "user":
                self._settled_last_user = self._settled + k
            self._settled_counts.append(n)
            self._settled_tokens += n
            if m.role == "tool":
                self._settled_tool_tokens += n
            elif m.role in self._settled_pinned:
                self._settled_pinned[m.role] += n
            if m.role not in _PINNED_ROLES:
                self._opened = True
        self._settled += len(fixed)
        self._settled_at = (self.version, self._appends, len(msgs))


def _same_shape(old: Message, new: Message) -> bool:
    """Whether ``new`` in place of ``old`` leaves a normalized, paired prefix as it was (content may differ)."""
    if old.role != new.role or old.role in _PINNED_ROLES or old.tool_call_id != new.tool_call_id:
        return False
    if not _PLAIN_KINDS.isdisjoint((old.kind, new.kind)):
        return False  # (what normalization treats apart: an aborted output, a provider's compaction boundary)
    if [(c.id, c.name) for c in old.tool_calls] != [(c.id, c.name) for c in new.tool_calls]:
        return False
    # An empty user or assistant message would be dropped by normalization; a tool result is never dropped.
    return new.role == "tool" or bool(new.tool_calls) or _has_text(new)


def _has_text(message: Message) -> bool:
    if isinstance(message.content, str):
        return bool(message.content.strip())
    return any(not (p.type == "text" and not getattr(p, "text", "").strip()) for p in message.content)


def _shifted(pairs: Iterable[ToolPair], start: int) -> Iterable[ToolPair]:
    """``pairs`` of a list that begins at ``start`` in the view, as the view's indices."""
    if not start:
        return pairs
    return (ToolPair(p.call_id, p.name, p.call_index + start,
                     None if p.result_index is None else p.result_index + start) for p in pairs)


def _text_only(message: Message) -> bool:
    """Whether ``message`` carries nothing but text (so no media: see :func:`contextfold.media.media_of`)."""
    content = message.content
    return isinstance(content, str) or all(part.type == "text" for part in content)
