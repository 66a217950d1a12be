"""What a redactor remembers of the messages it redacted (issue 22), and the strings it reads in a message.

A session's messages are redacted for the learning of its secrets, for the summarizer and for every transcript the
archive keeps; the :class:`Ledger` keeps each result so that none of those scans a message twice, and
:func:`mentions_any` tells whether a message redacted earlier holds a secret learned since (then only it is redone).
:func:`surface` lists what redaction reads in a message (texts, arguments, mapping keys and values): the ledger's
re-check and the batch prefilter of ``MessageRedactor.redact_messages`` (:mod:`._messages`) search it.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import itertools
import json
import math
import operator
import threading
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ..messages import (
    DocumentPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    UnknownPart,
    exact_items,
    is_opaque,
    kept_value_type,
    same_meta_but_id,
)
from ._scans import message_chars
from ._triggers import ascii_positions

__all__ = [
    "ID_KEY", "LEDGER_CHARS", "LEDGER_ENTRIES", "MAX_PASSES", "SEPARATOR", "Ledger", "SameMessage", "copy_groups",
    "joined_starts", "mentions_any", "read_surface", "search_joined", "short_strings", "surface",
]

# A joined ASCII text at least this long is searched for several needles in one pass of an automaton (shorter, one
# search per needle costs less than the call).
_ONE_PASS_MIN_CHARS = 65_536
# Texts joined for one search are separated by this: no trigger holds it, and no run crosses it.
SEPARATOR = "\x00"

# Messages a redactor redacted, with the result, remembered (issue 22): a session's messages are redacted for its
# secrets' learning, for the summarizer and for every transcript the archive keeps, and each of those used to scan
# the whole view again. An entry holds the memory's generation it was made at; a string remembered since needs
# only that string looked for (SecretMemory.learned_since). Entries are found by content: a message equal field for
# field to one redacted before (role, text, parts, calls, ids, meta and extra; compared, not hashed) but for its
# ``meta["id"]`` (the manager numbers every message it is given) redacts to the same, with its own id redacted on
# its own (a mapping's items are redacted independently). So a history that repeats a message (the same output read
# again, sessions replayed one after another) scans it once. Bounded: about 40 MB at the cap, the oldest dropped.
LEDGER_ENTRIES = 250_000
# And bounded by the text its entries keep alive (the messages and what they redacted to; characters, each text
# object once): entries outlive the view they came from, and an entry of a redacted output holds the output and its
# redacted copy: 250,000 entries of 50 KB outputs were ~25 GB. Above the largest view a first prepare() reads, whose
# every entry its transcript and summary look up again (100,000 distinct recorded messages: ~149M characters; the
# repeated ones ~6M; a 1M-token window ~4M): the entries dropped are those of messages gone from the view.
LEDGER_CHARS = 256 * 1024 * 1024
# What an entry keeps beyond its texts (its tuple, key and dict slots), counted in characters: a copy sharing its
# text with a recorded message costs this much.
_ENTRY_CHARS = 64
# Past LEDGER_CHARS, the oldest entries are dropped until they keep this fraction of it (not one drop per put).
_SHED_TO = 0.75
# A message redacted while something was learned is redone at most this many times in a row (the secrets a message
# teaches are redacted where the message itself mentions them earlier); past that, its entry's generation is the
# one before the last pass, so the next use checks again.
MAX_PASSES = 3
ID_KEY = "id"
# Redactor.redact_text looks a string up (among those found clean, and those a bulk clearing cleared) when it is at
# most this long; a longer one is scanned. So a bulk clearing (Redactor.clearing: a batch's short strings, an event
# run's) takes only strings this long: one module's constant for the redactor and the callers that clear.
CLEARED_MAX_CHARS = 256


def _same_but_id(a: Message, b: Message) -> bool:
    """Whether ``a`` and ``b`` are equal in every field but ``meta["id"]`` (which both have or both lack)."""
    # (Identity first: a repeated history's copies share their field objects, and a mapping compared by value is
    # walked item by item even when it is the same object.)
    origin = a._origin
    if origin is not None and origin is b._origin:
        return True  # (copies of one message that differ only by their ids, see Message.with_meta)
    if not (a.role == b.role and (a.content is b.content or _same_items(a.content, b.content))
            and (a.tool_calls is b.tool_calls or _same_items(a.tool_calls, b.tool_calls))
            and a.tool_call_id == b.tool_call_id and a.name == b.name
            and (a.extra is b.extra or same_value(a.extra, b.extra))):
        return False
    meta_a, meta_b = a.meta, b.meta
    if len(meta_a) != len(meta_b) or ((ID_KEY in meta_a) != (ID_KEY in meta_b)):
        return False
    missing = object()
    # (A loop, not all() over a generator: this runs for every copy of a bulk add.)
    for key, value in meta_a.items():
        if key != ID_KEY:
            other = meta_b.get(key, missing)
            if other is not value and not same_value(value, other):
                return False
    return True


def same_value(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are equal and of the same types throughout (a meta or extra value of two messages).

    ``==`` alone says ``1``, ``True`` and ``1.0`` are equal (and ``0.0`` and ``-0.0``): a copy found equal so took
    the original's redaction, and with it the original's value of another type (JSON writes ``true`` for ``1``).
    Mappings compare item by item in order (keys of the same types too), sequences element by element, sets element
    for element; anything else of one type by ``==`` and its ``repr`` too (one instant at two UTC offsets, ``1.0`` and
    ``1`` as decimals, signed zeros in a complex are equal, written differently). Stricter than ``==`` only: two values
    it tells apart are redacted each on its own.
    """
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is str or kind is int or kind is bool:
        return bool(a == b)
    if kind is float:
        return bool(a == b) and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, Mapping):
        return len(a) == len(b) and all(map(same_value, a, b)) and all(map(same_value, a.values(), b.values()))
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(map(same_value, a, b))
    if isinstance(a, set | frozenset):
        # each element a partner of the same types throughout (the sets of meta values are small)
        return len(a) == len(b) and all(any(same_value(x, y) for y in b) for x in a)
    return bool(a == b) and repr(a) == repr(b)


def _same_items(a: str | tuple[Any, ...], b: str | tuple[Any, ...]) -> bool:
    """Whether two messages' contents (or calls) are equal, by contextfold's own ``==`` only (never a caller's).

    A part or call of a caller's subclass answers ``==`` itself: one that lied made a message holding a secret share
    the entry of a clean one, and came back as found clean (eighteenth stop, fix F2). Such a message shares no entry.
    """
    if isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and a == b  # (a Message's text is held as an exact str)
    # (and field for field of the same types: a part's data or a call's extra holding 1 where the other holds True)
    return exact_items(a) and exact_items(b) and a == b and all(map(_same_fields, a, b))


def _same_fields(a: Any, b: Any) -> bool:
    """Whether two parts (or calls) already found ``==`` hold values of the same types too (see :func:`same_value`)."""
    return a is b or (type(a) is type(b)
                      and all(same_value(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)))


class SameMessage:
    """A ledger key: equal to another when the messages are equal in every field but their ``meta["id"]``.

    The hash reads only strings (whose hashes Python keeps with them), so a key costs little more than a tuple;
    equality compares the fields themselves, so two messages share an entry only when their content is identical.
    """

    __slots__ = ("_hash", "message")

    def __init__(self, m: Message) -> None:
        self.message = m
        content = m.content
        calls = m.tool_calls
        self._hash = hash((
            m.role,
            content if isinstance(content, str) else tuple([getattr(p, "text", None) for p in content]),
            # (the calls' ids too: an agent's same call, made again, compares unequal under a new id)
            tuple([(c.id, c.arguments) for c in calls]) if calls else (),
            m.tool_call_id,
            m.name,
            len(m.meta),
            len(m.extra),
        ))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SameMessage) and (
            other.message is self.message or _same_but_id(self.message, other.message))


def _bounded_put(entries: dict[Any, tuple[Message, Message, int]], key: object,
                 entry: tuple[Message, Message, int]) -> None:
    entries[key] = entry
    if len(entries) > LEDGER_ENTRIES:  # the oldest quarter: the start of a long session, compacted away
        for stale in list(itertools.islice(entries, len(entries) // 4)):
            del entries[stale]


def _drop_oldest(entries: dict[Any, Any], count: int) -> None:
    """Drop the first ``count`` entries put (dicts keep insertion order)."""
    for stale in list(itertools.islice(entries, count)):
        del entries[stale]


def _entry_chars(entry: tuple[Message, Message, int]) -> int:
    """The characters an entry keeps alive (its message, and what it redacted to when that is another message)."""
    return message_chars(entry[0]) if entry[1] is entry[0] else message_chars(entry[0]) + message_chars(entry[1])


def _bound(entries: dict[Any, Any]) -> None:
    """Drop the oldest entries past :data:`LEDGER_ENTRIES` (a quarter at least): the start of a long session."""
    if len(entries) > LEDGER_ENTRIES:
        for stale in list(itertools.islice(entries, max(len(entries) // 4, len(entries) - LEDGER_ENTRIES))):
            del entries[stale]


# Of one message, copies (given only an id, see Message.with_meta) known clean at this many generations at most.
_COPY_ENTRIES = 4
# An entry for the copies of one message: (that message, the generation, the ids known clean then).
CopyEntry = tuple[Message, int, frozenset[str]]


class Ledger:
    """What messages redacted to: ``(message, redacted, generation)`` by the message object, and by its content.

    A message is found by itself first (each message of a view is looked up again by every transcript), then by
    content (see :class:`SameMessage`): the entry found that way belongs to an equal message, whose redaction
    ``MessageRedactor._recall`` adapts to this one's id and records for this object.

    The copies of one message given only an id (``Message._origin``: a repeated history's, issue 22) that redact to
    themselves are recorded once for them all, by what they are copies of: at a generation, with the ids found clean
    then (:meth:`put_copies`). Such a copy is recorded as itself when its id is among them; no entry per copy.
    """

    __slots__ = ("_batch", "_by_content", "_by_object", "_chars", "_copies", "_lock")

    def __init__(self) -> None:
        self._by_object: dict[int, tuple[Message, Message, int]] = {}  # (the message kept: its id stays its own)
        self._by_content: dict[SameMessage, tuple[Message, Message, int]] = {}
        self._copies: dict[int, tuple[CopyEntry, ...]] = {}  # id(origin) -> its copies' entries, newest last
        self._lock = threading.Lock()
        # The last batch redacted, kept for the next one only (see keep_batch): (generation, messages, results).
        self._batch: tuple[int, list[Message], tuple[Message, ...]] | None = None
        # The characters of text the entries keep alive, counted as they are put (an entry replaced or dropped is
        # not taken off: an upper bound), counted exactly again when it passes LEDGER_CHARS (see _shed).
        self._chars = 0

    def clear(self) -> None:
        """Forget every entry and the kept batch (the session is over: ``ContextManager.close``)."""
        with self._lock:
            self._by_object.clear()
            self._by_content.clear()
            self._copies.clear()
            self._batch = None
            self._chars = 0

    def forget(self, messages: Iterable[Message]) -> None:
        """Drop the entries of ``messages`` (held by the caller) and of the copies they were made from, and the batch.

        What a manager does once a compaction's transcript is written: nothing asks for the messages it removed
        any more, and their entries kept them (and the redacted copies of those holding a secret) alive until the
        cap shed them (100,000 distinct recorded messages: 149M characters after their first prepare(), the view
        41 messages). A message asked for again is redacted again (the same result).
        """
        gone = {id(m): m for m in messages}  # (alive while ``messages`` is held: an id is one object's)
        if not gone:
            return
        origins = {id(m._origin) for m in gone.values() if m._origin is not None}
        with self._lock:
            by_object = self._by_object
            for key in gone.keys() & by_object.keys():
                del by_object[key]
            by_content = self._by_content
            for same in [same for same, entry in by_content.items() if id(entry[0]) in gone]:
                del by_content[same]
            copies = self._copies
            for key in origins & copies.keys():
                del copies[key]
            self._batch = None  # (it was the transcript's: the view the compaction was cut from)
            self._chars = self._held_chars()

    def _count(self, chars: int) -> None:
        """Add ``chars`` to what the entries keep; past :data:`LEDGER_CHARS`, drop the oldest (the lock is held)."""
        self._chars += chars
        if self._chars > LEDGER_CHARS:
            self._shed()

    def _new_chars(self, entry: tuple[Message, Message, int]) -> int:
        """The characters ``entry`` keeps alive that the one it replaces did not (the lock is held)."""
        m, out = entry[0], entry[1]
        known = self._by_object.get(id(m))
        if known is None or known[0] is not m:
            return _entry_chars(entry)
        return 0 if out is m or out is known[1] else message_chars(out)

    def _held_chars(self) -> int:
        """The characters of text the entries keep alive, each text (and each calls' tuple) counted once."""
        seen: set[int] = set()
        total = 0
        messages: list[Message] = []
        for entry in itertools.chain(self._by_object.values(), self._by_content.values()):
            messages.append(entry[0])
            if entry[1] is not entry[0]:
                messages.append(entry[1])
        messages.extend(entries[0][0] for entries in self._copies.values())
        for m in messages:
            content, calls = m.content, m.tool_calls
            if id(content) not in seen:
                seen.add(id(content))
                total += message_chars(m) - sum(len(call.arguments) for call in calls)
            if calls and id(calls) not in seen:
                seen.add(id(calls))
                total += sum(len(call.arguments) for call in calls)
        return total + _ENTRY_CHARS * (len(self._by_object) + len(self._by_content))

    def _shed(self) -> None:
        """Drop the oldest entries (a quarter at a time) until what they keep is under :data:`_SHED_TO` of the cap.

        The oldest are mostly the start of a long session, compacted away: what they hold is the ledger's alone. One
        still in use is redacted again when next asked (the same result: the ledger saves work, it decides nothing).
        """
        held = self._held_chars()
        while held > LEDGER_CHARS * _SHED_TO and (self._by_object or self._by_content or self._copies):
            for entries in (self._by_object, self._by_content, self._copies):
                _drop_oldest(entries, max(1, len(entries) // 4))
            held = self._held_chars()
        self._chars = held

    def _own(self, m: Message) -> tuple[Message, Message, int] | None:
        """``m``'s own entry: by the object, else as a clean copy (see :meth:`put_copies`)."""
        entry = self._by_object.get(id(m))
        if entry is not None and entry[0] is m:
            return entry
        origin = m._origin
        if origin is None:
            return None
        entries = self._copies.get(id(origin))
        if entries is None or entries[0][0] is not origin:
            return None
        own = m.meta.get(ID_KEY)
        for _, generation, clean_ids in reversed(entries):
            if own in clean_ids:
                return (m, m, generation)
        return None

    def own_entry(self, m: Message) -> tuple[Message, Message, int] | None:
        """``m``'s entry made for the object itself (not as a clean copy, nor by content), or None."""
        entry = self._by_object.get(id(m))
        return entry if entry is not None and entry[0] is m else None

    def renew(self, redacted: list[tuple[Message, Message]], generation: int) -> None:
        """Record each ``(message, what it redacts to)`` at ``generation``, by the object and by content, in one lock.

        What :meth:`put` does for each, for the entries ``MessageRedactor._renewed`` found still true (issue 22).
        """
        if not redacted:
            return
        entries = [(m, out, generation) for m, out in redacted]
        keys = [SameMessage(m) for m, _ in redacted]
        with self._lock:
            chars = sum([self._new_chars(entry) for entry in entries])
            for entry, key in zip(entries, keys, strict=True):
                _bounded_put(self._by_object, id(entry[0]), entry)
                _bounded_put(self._by_content, key, entry)
            self._count(chars)

    def recorded(self, m: Message) -> bool:
        """Whether ``m`` itself has an entry (not only a message equal to it)."""
        return self._own(m) is not None

    def unrecorded(self, items: Iterable[Message], recorded: list[Message] | None = None) -> list[Message]:
        """Those of ``items`` that have no entry of their own (:meth:`recorded`), in one loop.

        ``recorded``: where the others go, in order (the caller's second pass over 100,000 messages, issue 22).
        """
        by_object, copies = self._by_object, self._copies
        out: list[Message] = []
        for m in items:
            entry = by_object.get(id(m))
            if entry is None or entry[0] is not m:
                origin = m._origin  # (a copy of an origin with no entry: not recorded, without a second look)
                if origin is None or id(origin) not in copies or self._own(m) is None:
                    out.append(m)
                    continue
            if recorded is not None:
                recorded.append(m)
        return out

    def current(self, items: list[Message], generation: int) -> list[Message | None]:
        """What each of ``items`` redacted to, where its own entry was made at ``generation``; else None.

        What ``MessageRedactor._recall`` gives such a message, in one loop: a transcript looks up every message of the
        view again, and most were redacted at the memory's present generation (issue 22).
        """
        by_object = self._by_object
        out: list[Message | None] = []
        copies = self._copies
        for m in items:
            entry = by_object.get(id(m))
            if entry is not None and entry[0] is m:
                out.append(entry[1] if entry[2] == generation else None)
                continue
            origin = m._origin
            known = copies.get(id(origin)) if origin is not None else None
            if known is None or known[0][0] is not origin:
                out.append(None)
                continue
            # (A copy recorded by its origin: itself when its id is among the newest set holding it, at that set's
            # generation; 97,000 of the 100,000 messages of a repeated history, without a tuple made for each.)
            own = m.meta.get(ID_KEY)
            found: Message | None = None
            for _, at, clean_ids in reversed(known):
                if own in clean_ids:
                    found = m if at == generation else None
                    break
            out.append(found)
        return out

    def keep_batch(self, items: list[Message], redacted: tuple[Message, ...], generation: int) -> None:
        """Keep what ``items`` redacted to at ``generation`` for the next :meth:`from_batch`, and for it only.

        A compaction redacts the summarizer's input, then the transcript of the view it was cut from: the second
        batch then takes the first's results run by run (:func:`_runs_of`), instead of a look-up per message
        (issue 22: one :meth:`current` of 100,000 messages). Kept for one use, so a batch is not held after.
        """
        self._batch = (generation, items, redacted)

    def from_batch(self, items: list[Message], generation: int) -> tuple[list[Message | None], list[int]] | None:
        """What each of ``items`` in the batch kept last redacted to (None for the others, whose indexes follow).

        None when no batch is kept. The kept batch is dropped here, used or not, and is used only when nothing was
        learned since it was redacted (the results stand then, as :meth:`current` would give them).
        """
        batch, self._batch = self._batch, None
        if batch is None or batch[0] != generation or not batch[1]:
            return None
        _, kept, redacted = batch
        runs = _runs_of(items, kept)
        if runs is not None:
            out: list[Message | None] = [None] * len(items)
            missing: list[int] = []
            end = 0
            for at, start, length in runs:
                missing.extend(range(end, at))
                out[at : at + length] = redacted[start : start + length]
                end = at + length
            missing.extend(range(end, len(items)))
            return out, missing
        within = _runs_of(kept, items)  # (``items`` a run of the batch: the summary's input after a catch-up's batch)
        if within is not None:
            out = [None] * len(items)
            for start, at, length in within:
                out[at : at + length] = redacted[start : start + length]
            return out, []
        # (Every kept message is alive while ``kept`` is held: an id found among them is that message.)
        found = dict(zip(map(id, kept), redacted, strict=True))
        out = list(map(found.get, map(id, items)))
        return out, [i for i, known in enumerate(out) if known is None]

    def get(self, m: Message, key: SameMessage | None = None) -> tuple[Message, Message, int] | None:
        """``m``'s entry, by itself or else by content (``key``: ``SameMessage(m)``, when the caller has it)."""
        entry = self._own(m)
        if entry is not None:
            return entry
        return self._by_content.get(SameMessage(m) if key is None else key)

    def by_content(self, key: SameMessage) -> tuple[Message, Message, int] | None:
        """The entry of a message equal to ``key``'s but for its id (the caller knows it has none of its own)."""
        return self._by_content.get(key)

    def put(self, m: Message, redacted: Message, generation: int, key: SameMessage | None = None, *,
            by_content: bool = True) -> None:
        """Record ``m``'s redaction; ``by_content=False``: for ``m`` itself only (its content's entry stands)."""
        entry = (m, redacted, generation)
        if by_content and key is None:
            key = SameMessage(m)
        with self._lock:
            chars = self._new_chars(entry)
            _bounded_put(self._by_object, id(m), entry)
            if by_content:
                _bounded_put(self._by_content, key, entry)
            self._count(chars)

    def put_clean(self, items: list[Message], generation: int) -> None:
        """Record each of ``items`` as redacting to itself at ``generation``, by the object and by content, in one lock.

        What :meth:`put` does for each: the messages of a batch the prefilter cleared (issue 22: a cold compaction
        records ~5,000 of them, a call and a lock each).
        """
        if not items:
            return
        entries = [(m, m, generation) for m in items]
        keys = list(map(SameMessage, items))
        with self._lock:
            by_object, by_content = self._by_object, self._by_content
            chars = sum([message_chars(m) for m, known in zip(items, map(by_object.get, map(id, items)), strict=True)
                         if known is None or known[0] is not m])
            by_object.update(zip(map(id, items), entries, strict=True))
            by_content.update(zip(keys, entries, strict=True))
            _bound(by_object)
            _bound(by_content)
            self._count(chars)

    def put_same(self, items: list[Message], generation: int) -> None:
        """Record each of ``items`` as redacting to itself at ``generation``, for the object only, under one lock.

        What ``MessageRedactor.learn_from`` does for the clean copies of a repeated history that share no origin (one
        :meth:`put` per copy was a fifth of learning 100,000 recorded messages, issue 22).
        """
        if not items:
            return
        by_object = self._by_object
        with self._lock:
            by_object.update({id(m): (m, m, generation) for m in items})
            if len(by_object) > LEDGER_ENTRIES:  # the oldest: the start of a long session, compacted away
                drop = max(len(by_object) // 4, len(by_object) - LEDGER_ENTRIES)
                for stale in list(itertools.islice(by_object, drop)):
                    del by_object[stale]
            self._count(_ENTRY_CHARS * len(items))  # (copies: their text is their first copy's, counted with it)

    def put_own(self, redacted: Sequence[tuple[Message, Message]], generation: int) -> None:
        """Record each ``(message, what it redacts to)`` at ``generation``, for the object only, under one lock.

        What :meth:`put` with ``by_content=False`` does for each: the copies ``MessageRedactor.learn_from`` gives
        their content's redaction with their own id (their content's entry stands).
        """
        if not redacted:
            return
        entries = [(m, out, generation) for m, out in redacted]
        with self._lock:
            chars = sum([self._new_chars(entry) for entry in entries])
            by_object = self._by_object
            by_object.update(zip(map(id, map(_FIRST_OF, redacted)), entries, strict=True))
            _bound(by_object)
            self._count(chars)

    def put_copies(self, origin: Message, generation: int, clean_ids: frozenset[str]) -> None:
        """Record that every copy of ``origin`` (given only an id) whose id is in ``clean_ids`` redacts to itself.

        True at ``generation`` when ``origin``'s content (all but the id) redacts to itself then, and each id of
        ``clean_ids`` too. The ids are the caller's set, shared by every origin of one batch; the entries of one
        origin keep the newest few (a copy of an older batch whose entry went is read again, as one never seen).
        """
        entry: CopyEntry = (origin, generation, clean_ids)
        with self._lock:
            known = self._copies.get(id(origin))
            if known is None or known[0][0] is not origin:
                self._copies[id(origin)] = (entry,)
                if len(self._copies) > LEDGER_ENTRIES:
                    for stale in list(itertools.islice(self._copies, len(self._copies) // 4)):
                        del self._copies[stale]
                self._count(message_chars(origin))
            else:
                self._copies[id(origin)] = (*known, entry)[-_COPY_ENTRIES:]

    def __len__(self) -> int:
        return len(self._by_object)


_FIRST_OF = operator.itemgetter(0)

# A batch kept for the next one is found in it as at most this many runs (the summary's input is the view but for a
# few messages kept verbatim: its system message, pinned ones, the recent turns); else it is found by id.
_MAX_RUNS = 64


def _runs_of(items: list[Message], kept: list[Message]) -> list[tuple[int, int, int]] | None:
    """``kept`` as runs of ``items`` in order, compared by identity: (where in ``items``, where in ``kept``, length).

    None when ``kept`` is not ``items`` with messages left out, or takes more than :data:`_MAX_RUNS` runs. Each run
    is found and measured by C loops (a summary's input of 99,992 of a view's 100,000 messages, issue 22).
    """
    runs: list[tuple[int, int, int]] = []
    at = start = 0
    while start < len(kept):
        if len(runs) >= _MAX_RUNS:
            return None
        same = map(operator.is_, itertools.islice(items, at, None), itertools.repeat(kept[start]))
        found = next(itertools.compress(itertools.count(at), same), None)
        if found is None:
            return None
        differ = map(operator.is_not, itertools.islice(items, found, None), itertools.islice(kept, start, None))
        length = next(itertools.compress(itertools.count(), differ), min(len(items) - found, len(kept) - start))
        runs.append((found, start, length))
        at, start = found + length, start + length
    return runs


def copy_groups(items: Iterable[Message]) -> list[list[Message]]:
    """``items`` in groups of copies (equal but for ``meta["id"]``), each group in order, groups by first member.

    A copy given only an id is known by what it is a copy of (``Message._origin``); the others by their field
    objects (a repeated history's copies share them) and then their meta, compared by identity
    (:func:`~contextfold.messages.same_meta_but_id`). Equal messages that share nothing may land in different
    groups: the ledger's key by content (:class:`SameMessage`) finds them equal after.
    """
    groups: list[list[Message]] = []
    by_origin: dict[int, list[Message]] = {}
    by_objects: dict[tuple[Any, ...], list[list[Message]]] = {}
    for m in items:
        origin = m._origin
        if origin is not None:
            group = by_origin.get(id(origin))
            if group is None:
                group = by_origin[id(origin)] = [m]
                groups.append(group)
            else:
                group.append(m)
            continue
        objects = (id(m.content), id(m.tool_calls), id(m.extra), m.role, m.tool_call_id, m.name)
        found = by_objects.get(objects)
        if found is None:
            group = [m]
            by_objects[objects] = [group]
            groups.append(group)
            continue
        for group in found:
            if same_meta_but_id(group[0], m):
                group.append(m)
                break
        else:
            group = [m]
            found.append(group)
            groups.append(group)
    return groups


def surface(m: Message) -> list[str] | None:
    """Every string ``Redactor.redact_message`` reads in ``m`` (mapping keys too), or None when unsure.

    JSON arguments with escapes or non-ASCII text come with the strings they decode to (which are then not
    substrings of the text). None for what the prefilter cannot vouch for: non-ASCII mapping keys, in arguments
    too (``ſecret`` matches the secret-key rule case-insensitively but holds no trigger once lower-cased).
    """
    return read_surface(m)[0]


def read_surface(m: Message) -> tuple[list[str] | None, bool]:
    """:func:`surface` of ``m``, and whether it holds strings decoded from arguments (new strings, not ``m``'s own).

    A batch keeps what it can hold cheaply: a decoded string is made again when needed, not held for the batch.
    """
    out: list[str] = []
    decoded = False
    if isinstance(m.content, str):
        out.append(m.content)
    else:
        for part in m.content:
            if is_opaque(part):
                continue  # a provider's state is never redacted (see _redact_part), so never searched either
            if isinstance(part, TextPart | ThinkingPart):  # (a thinking part here is unsigned: its extra too)
                out.append(part.text)
                if part.extra and not _walk(part.extra, out):
                    return None, False
            elif isinstance(part, ImagePart | DocumentPart):
                if part.url:
                    out.append(part.url)
                if isinstance(part, DocumentPart) and part.title:
                    out.append(part.title)
                if part.extra and not _walk(part.extra, out):
                    return None, False
            elif isinstance(part, UnknownPart) and not _walk(part.data, out):
                return None, False
    if m.name:
        out.append(m.name)
    for call in m.tool_calls:
        read = _arguments(call.arguments, out)
        if read is None or (call.extra and not _walk(call.extra, out)):
            return None, False
        decoded = decoded or read
    for mapping in (m.meta, m.extra):
        if mapping and not _walk(mapping, out):
            return None, False
    return out, decoded


def _arguments(arguments: str, out: list[str]) -> bool | None:
    """Append what redaction reads of tool-call ``arguments`` to ``out``; None when unsure (see :func:`surface`).

    True when strings decoded from it were appended, False for the text alone.

    ``Redactor.redact_json_string`` reads the text and the strings it decodes to. Without escapes or non-ASCII
    characters each decoded key and value is a substring of the text; otherwise they are decoded here too (issue 22:
    a code edit's arguments hold escaped newlines, and such a message was redone for every secret learned since it
    was redacted, 557 of the first compaction of 100,000 recorded messages, though 13 mentioned one).
    """
    out.append(arguments)
    if "\\" not in arguments and arguments.isascii():
        return False
    try:
        decoded = json.loads(arguments)
    except ValueError:
        return False  # (not JSON: the text is all redaction reads)
    except RecursionError:
        return None  # (too deep to decode: redaction fails on it too)
    return True if _walk(decoded, out) else None


def short_strings(messages: Iterable[Message], max_chars: int) -> list[str]:
    """The strings of at most ``max_chars`` that ``Redactor.redact_message`` reads one by one in ``messages``.

    Their names, the keys and values of their meta and extra, and their tool calls' arguments with the strings
    those decode to: what ``Redactor.redact_text`` reads each on its own, and cheaply, once cleared in bulk
    (``Redactor.clearing``). Texts too (when that short); duplicates and non-strings may come with them.
    """
    out: list[str] = []
    for m in messages:
        if type(m.content) is str:
            out.append(m.content)
        if m.name:
            out.append(m.name)
        for mapping in (m.meta, m.extra):
            if mapping:
                _walk(mapping, out)  # (a non-ASCII key stops the walk: its strings are then read as they come)
        for call in m.tool_calls:
            arguments = call.arguments
            out.append(arguments)
            if len(arguments) <= _DECODED_ARGUMENTS_MAX_CHARS:
                with contextlib.suppress(ValueError, RecursionError):  # (not JSON: the text is all it reads)
                    _walk(json.loads(arguments), out)
            if call.extra:
                _walk(call.extra, out)
    return [text for text in out if len(text) <= max_chars]


# Tool-call arguments at most this long are decoded for their short strings (a code edit's are read on their own).
_DECODED_ARGUMENTS_MAX_CHARS = 4_096


def _walk(obj: Any, out: list[str]) -> bool:
    """Append the strings of a JSON-like ``obj`` (keys and values) to ``out``; False when it cannot list them all.

    That is at a non-ASCII key, and at a value that is no string, number, mapping, list or tuple of those exact
    types (a set, an object, an ``IntEnum`` member) but a ``UUID`` or ``Decimal`` (its text is listed: what redaction
    reads of it, see ``Redactor._redact_other``).
    """
    stack = [obj]
    while stack:  # (a mapping of strings, as meta mostly is, goes through the first branch of each item)
        item = stack.pop()
        kind = type(item)
        if kind is str:
            out.append(item)
        # (meta and extra are told by their type first: the ABC's isinstance is the slow path)
        elif kind is MappingProxyType or kind is dict or isinstance(item, Mapping):
            for key, value in item.items():
                if isinstance(key, str):
                    if not key.isascii():
                        return False
                    out.append(key)
                stack.append(value)
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif item is not None and kind is not int and kind is not float and kind is not bool:
            # (A string or number of a subclass too: redaction reads the texts it shows, see
            # Redactor._shown_redacted.)
            if kept_value_type(kind):  # (a UUID, a Decimal of a caller's meta: redaction reads its text, listed)
                out.append(str(item))
                continue
            return False  # (a set, an object: redaction reads its members or its text, not listed here)
    return True


def mentions_any(m: Message, strings: list[str]) -> bool:
    """Whether one of ``strings`` is in a string ``Redactor.redact_message`` reads in ``m`` (True when unsure)."""
    if not strings:
        return False
    strings_read = surface(m)
    if strings_read is None:
        return True
    text = strings_read[0] if len(strings_read) == 1 else SEPARATOR.join(strings_read)
    return any(s in text for s in strings)


def joined_starts(texts: list[str]) -> list[int]:
    """Where each of ``texts`` starts in ``SEPARATOR.join(texts)`` (C loops: 100,000 ids of a bulk add, issue 22)."""
    return list(map(operator.add, itertools.accumulate(map(len, texts), initial=0), range(len(texts))))


def search_joined(joined: str, starts: list[int], needles: Iterable[str], found: set[int]) -> None:
    """Add to ``found`` the index of every text of ``joined`` (which begin at ``starts``) holding a needle."""
    needles = needles if type(needles) is tuple else tuple(needles)
    if len(needles) > 1 and len(joined) >= _ONE_PASS_MIN_CHARS and joined.isascii() and \
            not any(SEPARATOR in needle for needle in needles):
        # (One pass for all the needles instead of one per needle: a session's remembered secrets, ~15 of them in
        # a cold compaction, each read ~6 MB of its messages' text. A match's text is the text it starts in.)
        positions = ascii_positions(needles, joined)
        if positions is not None:
            found.update(bisect.bisect_right(starts, at) - 1 for at in positions)
            return
    count = len(starts)
    for needle in needles:
        at = joined.find(needle)
        while at >= 0:
            index = bisect.bisect_right(starts, at) - 1
            found.add(index)
            if index + 1 >= count:
                break
            at = joined.find(needle, starts[index + 1])
