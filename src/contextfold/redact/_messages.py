"""Message-level redaction: what a :class:`~contextfold.redact.Redactor` redacted each message to, and batches.

A session's messages are redacted for the learning of its secrets, for the summarizer and for every transcript the
archive keeps. :class:`MessageRedactor` redacts them with its redactor (whose patterns, memory and text-level
redaction it uses) and keeps each result in its :class:`~contextfold.redact._ledger.Ledger`, so that a message asked
again is looked at only for the secrets learned since. In bulk (``redact_messages``, ``learn_from``,
``redact_ahead``) a prefilter searches all the batch's strings at once for what any pattern needs and for what is
remembered; a message holding none of it is clean without being scanned.

Each :class:`~contextfold.redact.Redactor` holds one (its public message methods delegate to it); a copy of a
redactor with another memory gets its own, since what a message redacts to depends on the memory.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..messages import Message, freeze
from ..telemetry._pace import READ_AHEAD_SLICE_S, GilPacer
from ._ledger import (
    CLEARED_MAX_CHARS,
    ID_KEY,
    MAX_PASSES,
    SEPARATOR,
    Ledger,
    SameMessage,
    copy_groups,
    joined_starts,
    mentions_any,
    read_surface,
    search_joined,
    short_strings,
    surface,
)

if TYPE_CHECKING:
    from ._scanner import Scanner
    from ._scans import ScanCache
    from .memory import SecretMemory

__all__ = ["MessageRedactor", "TextRedactor"]

# A message without meta["id"], to the bulk learning's test of a copy's id (such a copy's own part is nothing).
_NO_ID = object()
# The batch prefilter of redact_messages (issue 12: a 100,000-message transcript spent 4.5 s redacting text by text):
# past this many remembered secrets it is not used (each one is searched for on its own); texts are joined by
# SEPARATOR (contextfold.redact._ledger).
_PREFILTER_MAX_LEARNED = 64
# The batch prefilter lowers and joins the texts of this many characters at a time (issue 22: 100,000 distinct
# messages held their texts three times over at once, and the strings decoded from their arguments with them).
_PREFILTER_CHUNK_CHARS = 4_000_000
# Of a bulk redaction of at most this many messages (a turn's add(), not a long history's transcript), the tool
# outputs the prefilter cleared are remembered as scanned: the read-ahead blanks them for their digests next.
_REMEMBER_CLEARED_MAX_BATCH = 1_000
# The paced read-ahead redacts its batch in bulk slices of about this many characters, pausing between them.
_AHEAD_SLICE_CHARS = 16_384
# A turn's batch looks up the scans of its text contents at least this long before the prefilter searches them (a
# shorter one costs the prefilter less than the look-up), and remembers those it cleared (tool outputs: any length).
_KNOWN_SCAN_MIN_CHARS = 256


class TextRedactor(Protocol):
    """What a :class:`MessageRedactor` uses of its :class:`~contextfold.redact.Redactor` (which imports this module).

    Its settings and memory, its patterns compiled for search (their scans and prefilter), and the redaction of one
    message's fields.
    """

    @property
    def enabled(self) -> bool: ...
    @property
    def callback(self) -> Callable[[str], str] | None: ...
    @property
    def remember(self) -> bool: ...
    @property
    def memory(self) -> SecretMemory: ...
    @property
    def _scanner(self) -> Scanner: ...
    @property
    def _learned(self) -> Mapping[str, str]: ...
    def _generation(self) -> int: ...
    def _redact_item(self, key: Any, value: Any) -> Any: ...
    def _redact_fields(self, m: Message) -> Message: ...
    def clearing(self, texts: Iterable[str]) -> AbstractContextManager[None]: ...


class MessageRedactor:
    """Redacts messages with ``redactor``, one by one or in bulk, keeping what each redacted to in its ledger.

    What :meth:`Redactor.redact_message`, :meth:`~Redactor.redact_messages`, :meth:`~Redactor.learn_from`,
    :meth:`~Redactor.redact_ahead` and :meth:`~Redactor.is_clean` do. The ledger's entries hold the generation of
    ``redactor.memory`` they were made at: bound to that redactor and its memory.
    """

    __slots__ = ("ledger", "redactor")

    def __init__(self, redactor: TextRedactor) -> None:
        self.redactor = redactor
        self.ledger = Ledger()

    def redact_message(self, m: Message) -> Message:
        """``m`` with secrets redacted in its text, tool-call arguments, meta and extra.

        Each message is redacted once and the result kept (with a callback: every time): asked again, the redactor
        looks in it only for the secrets learned since (see :meth:`_recall`). A secret the message itself teaches is
        redacted wherever the message mentions it, also before the part that taught it.
        """
        redactor = self.redactor
        if not redactor.enabled:
            return m
        if redactor.callback is None:
            known = self._recall(m)
            if known is not None:
                return known
        plain = redactor.callback is None and not redactor._learned  # then a message found clean before is clean again
        if plain and redactor._scanner.scans.is_clean(m):
            self.ledger.put(m, m, 0)
            return m
        for _ in range(MAX_PASSES):
            generation = redactor._generation()
            out = redactor._redact_fields(m)
            if redactor._generation() == generation:
                break
        # Nothing changed is the message itself (_redact_fields keeps every unchanged field and part by identity):
        # never ``==``, which a caller's part or container class answers itself (one that lied kept the original,
        # secret included, eighteenth stop, fix F2).
        if out is m and plain and not redactor._learned:
            redactor._scanner.scans.mark_clean(m)
        if redactor.callback is None:
            self.ledger.put(m, out, generation)
        return out

    def _recall(self, m: Message, clean_ids: frozenset[str] = frozenset(),
                key: SameMessage | None = None,
                entry: tuple[Message, Message, int] | None = None) -> Message | None:
        """What ``m`` redacts to, when it was redacted before and no secret learned since occurs in it; else None.

        The result of a redaction depends on the message, the patterns and which remembered strings occur in the
        message's strings; the memory only grows, so when none of the strings learned since occurs, the result
        stands (and is marked as made now). ``key``: ``SameMessage(m)``, when the caller made it; ``entry``: the
        ledger's entry for it, when the caller looked it up.
        """
        if entry is None:
            entry = self.ledger.get(m, key)
            if entry is None:
                return None
        original, out, seen = entry
        now = self.redactor._generation()
        if seen != now and mentions_any(m, self.redactor.memory.learned_since(seen)):
            return None
        if original is not m:
            transplanted = self._transplant(m, original, out, clean_ids)
            if transplanted is None or self.redactor._generation() != now:
                return None  # (its id taught a secret: the whole message is redone, as any message that teaches)
            out = transplanted
        if seen != now:
            self.ledger.put(m, out, now, key)
        elif original is not m:
            # (A copy of a message recorded at this generation: its content's entry stands, it gets its own.)
            self.ledger.put(m, out, now, by_content=False)
        return out

    def _transplant(self, m: Message, original: Message, redacted: Message,
                    clean_ids: frozenset[str] = frozenset()) -> Message | None:
        """``m`` redacted, from ``original``'s redaction: the same but for ``meta["id"]``, redacted here on its own.

        ``clean_ids``: ids known to redact to themselves now (:meth:`_clean_ids`), not scanned again.
        """
        if redacted is not original and redacted == original:
            # (An entry this redactor does not make: redone rather than guessed. A caller's class answering this
            # ``==`` can only have the message redone, never kept.)
            return None
        clean = redacted is original
        if ID_KEY not in m.meta:
            return m if clean else redacted
        own = m.meta[ID_KEY]
        own_redacted = own if own in clean_ids else self.redactor._redact_item(ID_KEY, own)
        if clean and own_redacted == own:
            return m
        base = m if clean else redacted
        meta = {key: (own_redacted if key == ID_KEY else base.meta[key]) for key in m.meta}
        return replace(base, meta=freeze(meta))

    def is_clean(self, m: Message) -> bool:
        """Whether :meth:`redact_message` is known to return ``m`` itself now (found clean, nothing learned since)."""
        if not self.redactor.enabled or self.redactor.callback is not None:
            return False
        known = self._recall(m)
        if known is not None:
            return known is m
        return not self.redactor._learned and self.redactor._scanner.scans.is_clean(m)

    def redact_ahead(self, messages: Iterable[Message], *, paced: bool = True) -> int:
        """Redact ``messages`` (learning their secrets) and keep the results for the transcripts and summaries to come.

        What a session does with each message as it is read (``add()`` past half the soft threshold, the background
        read-ahead while the agent waits for its model): a compaction then finds every message redacted and looks
        only for what was learned since. Paced, it leaves the GIL to other threads between messages; returns how
        many messages were looked at.
        """
        if not self.redactor.enabled or (type(messages) is list and not messages):
            return 0  # (past half the soft threshold add() redacts what it adds: most turns hand nothing)
        if not paced:
            # All at once (add() of a bulk, in the caller's thread): in bulk, one prefilter pass over the batch
            # instead of every message scanned on its own (it was a fifth of adding 100,000 recorded messages).
            items = list(messages)
            self.redact_messages(items)
            return len(items)
        # In bulk too, a slice of the batch at a time (issue 22: one by one, the first read-ahead of a session, the
        # messages added before half the soft threshold, scanned every text whole; the prefilter clears most).
        pacer = GilPacer(READ_AHEAD_SLICE_S)  # (the read-ahead's: see there)
        done = 0
        chunk: list[Message] = []
        size = 0
        for m in messages:
            chunk.append(m)
            size += len(m.content) if type(m.content) is str else _AHEAD_SLICE_CHARS // 4
            if size >= _AHEAD_SLICE_CHARS:
                self.redact_messages(chunk, kept=False)
                done += len(chunk)
                chunk, size = [], 0
                pacer.tick()
        if chunk:
            self.redact_messages(chunk, kept=False)
            done += len(chunk)
        return done

    def learn_from(self, messages: Iterable[Message], *, keep: bool = True) -> None:
        """Learn every secret the patterns find in ``messages`` (their texts, arguments, meta and extra).

        What a session does before it writes text of its own (a summary, a digest): a value found in context
        anywhere in the session is then known bare everywhere. ``keep`` off: nothing is kept for the next bulk
        redaction (a masking's catch-up: no summarizer's request follows it, see ``_keep_learned``).
        """
        if not self.redactor.enabled or not self.redactor.remember:
            return
        # A message redacted before was learned from. The others are grouped by what they are copies of (a repeated
        # history's copies are equal but for their ids: see copy_groups), and each group is read once, by content:
        # one message per content not seen before is redacted in bulk and recorded, clean ones too, so that the
        # summarizer's request and the transcript find every message in the ledger, at the generation reached here.
        # The copies come after, once the batch's secrets are known (an entry recalled before a secret is learned
        # would need that secret looked for in it again), needing only their ids read, cleared in bulk. A group whose
        # content redacts to itself records its copies with clean ids as themselves, in bulk (issue 22: a copy was
        # ~10 us of bookkeeping, a second of the first prepare() of 100,000 recorded messages); any other copy is
        # recalled (or redacted) one by one. An entry made stale by the batch's learning is renewed by its group's
        # first copy, and the groups after it with the same entry take the renewed one.
        ledger = self.ledger
        listed = messages if type(messages) is list else list(messages)
        recorded: list[Message] = []  # (those recorded before, in order: looked up again by _keep_learned)
        unrecorded = ledger.unrecorded(listed, recorded)
        firsts: dict[SameMessage, Message] = {}
        fresh: list[Message] = []
        plan: list[tuple[list[Message], SameMessage, tuple[Message, Message, int] | None, Message | None]] = []
        for group in copy_groups(unrecorded):
            head = group[0]
            key = SameMessage(head)
            entry = ledger.by_content(key)  # (not recorded itself: only its content can be)
            if entry is not None:
                plan.append((group, key, entry, None))
                continue
            first = firsts.get(key)
            if first is None:
                firsts[key] = head
                fresh.append(head)
                if len(group) > 1:
                    plan.append((group[1:], key, None, head))
            else:
                plan.append((group, key, None, first))
        del firsts
        if fresh:
            self._learn_fresh(fresh)
        looked: list[Message] = [*fresh]  # (what is not known to redact to itself: looked up for the kept batch)
        if not plan:
            if keep:
                self._keep_learned(listed, recorded, looked, self.redactor._generation())
            return
        # (each copy's id, in plan order, read by C loops: 97,000 copies of a repeated history, issue 22)
        all_ids = _ids_of(list(itertools.chain.from_iterable(map(_GROUP_OF, plan))))
        # The entries made stale by the fresh contents' learning (add() redacted a bulk's ends before it), renewed
        # at once: one search of the strings learned since in all of them, not a re-check per group's first copy.
        renewed = self._renew_stale(plan)  # id(stale entry) -> its current entry (or its first copy's, below)
        # (what clean_ids hold at: read before they are searched, so that a secret another thread learns meanwhile
        # makes them stale, never current: each copy is then recalled, its id redacted on its own)
        ids_at = self.redactor._generation()
        clean_ids = self._clean_ids(all_ids)
        offset = 0
        same: list[Message] = []  # copies that redact to themselves at ids_at, recorded so at the end
        moved: list[tuple[Message, Message]] = []  # copies that take their content's redaction with their own id
        for group, key, entry, first in plan:
            group_ids = all_ids[offset : offset + len(group)]
            offset += len(group)
            if first is not None:
                entry = ledger.get(first)
            rest: Sequence[Message] = group
            if entry is not None and entry[2] != self.redactor._generation():
                stale = entry
                entry = renewed.get(id(stale), stale)  # (renewed by an earlier copy: its entry is current)
                if entry is None or entry[2] != self.redactor._generation():
                    head, rest, group_ids = group[0], group[1:], group_ids[1:]
                    self._learn_copy(head, key, entry, clean_ids, ids_at, looked)
                    entry = ledger.get(head)  # (its own entry, found by the object)
                    renewed.setdefault(id(stale), entry)
            if entry is not None and entry[2] == ids_at and entry[1] is entry[0]:
                # Its content redacts to itself at ids_at: so does a copy whose id is clean (most of a repeated
                # history; recorded without the general path's checks). Recorded at ids_at, that stays true when a
                # copy's id teaches a secret meanwhile (later uses then look for it).
                redacted = entry[0]
                root = rest[0]._origin if rest else None
                if root is not None:  # (copies given only an id: one entry for them all, see Ledger.put_copies)
                    ledger.put_copies(root, ids_at, clean_ids)
                    if clean_ids.issuperset(group_ids) and not _holds_itself(rest, redacted):
                        continue  # (each one recorded so: the ids asked at C speed, issue 22)
                    for m in rest:
                        if m is redacted or m.meta.get(ID_KEY) not in clean_ids:
                            self._learn_copy(m, key, entry, clean_ids, ids_at, looked)
                    continue
                for m in rest:
                    own = m.meta.get(ID_KEY, _NO_ID)
                    if m is not redacted and (own is _NO_ID or own in clean_ids):
                        same.append(m)
                    else:
                        self._learn_copy(m, key, entry, clean_ids, ids_at, looked)
            elif entry is not None and entry[2] == ids_at and _moves_by_id(entry):
                # Its content redacts to another message at ids_at: a copy whose id is clean redacts to that one
                # with its own id (what _transplant makes), without the general path's look-ups (issue 22: the
                # copies of each message holding a secret, 1,433 of 100,000 recorded messages).
                redacted, keys = entry[1], tuple(entry[0].meta)
                for m in rest:
                    own = m.meta.get(ID_KEY)
                    # (a copy keeps its own meta's order: copies are told apart by the keys' values, not their order)
                    if (type(own) is str and own in clean_ids and m is not entry[0]
                            and ((m._origin is not None and m._origin is entry[0]._origin) or tuple(m.meta) == keys)):
                        moved.append((m, redacted.with_id(own)))
                    else:
                        self._learn_copy(m, key, entry, clean_ids, ids_at, looked)
            else:
                for m in rest:
                    self._learn_copy(m, key, entry, clean_ids, ids_at, looked)
        ledger.put_same(same, ids_at)
        ledger.put_own(moved, ids_at)
        if keep and self.redactor._generation() == ids_at:  # (else the copies recorded at ids_at are stale)
            self._keep_learned(listed, recorded, looked, ids_at, moved)

    def _renew_stale(self, plan: Sequence[tuple[list[Message], SameMessage, tuple[Message, Message, int] | None,
                                                Message | None]]) -> dict[int, tuple[Message, Message, int] | None]:
        """The plan's entries made before the memory's present generation, renewed where still true: by id(entry).

        :meth:`_renewed` of their messages, in one search per earlier generation; an entry a string learned since
        may occur in is left out (its group's first copy is recalled, or redacted, as before).
        """
        now = self.redactor._generation()
        stale = {id(entry): entry for _, _, entry, _ in plan if entry is not None and entry[2] != now}
        out: dict[int, tuple[Message, Message, int] | None] = {}
        if not stale:
            return out
        entries = list(stale.values())
        for entry, result in zip(entries, self._renewed([(entry[0], entry) for entry in entries]), strict=True):
            if result is not None:
                own = self.ledger.own_entry(entry[0])  # (renewed: its entry at the present generation)
                if own is not None and own[2] == now and own[1] is result:
                    out[id(entry)] = own
        return out

    def _keep_learned(self, listed: list[Message], recorded: list[Message], looked: list[Message],
                      generation: int, moved: Sequence[tuple[Message, Message]] = ()) -> None:
        """Keep what each of ``listed`` (the batch learned from) redacts to at ``generation`` for the next call.

        The next bulk redaction is the summarizer's request, a run of the view the catch-up learned from: it takes
        the results from the kept batch (``Ledger.from_batch``) instead of a look-up per message (issue 22). All but
        ``looked`` (the messages read one by one) and those recorded before (``recorded``) were recorded
        as redacting to themselves; those are looked up here (renewed, or redacted, as ``redact_messages`` would).
        Nothing is kept when a secret is learned on the way (nor with a callback, whose results are never kept).
        ``moved``: copies with what they redact to at ``generation`` (recorded so by the caller), not looked up.
        """
        if self.redactor.callback is not None:
            return
        if recorded:  # (recorded before: add() redacted them, maybe before a secret was learned)
            looked = [*looked, *recorded]
        results, missing = self._known(looked, generation, kept=False)
        for i in missing:
            results[i] = self.redact_message(looked[i])
        if self.redactor._generation() != generation:
            return
        # (each message takes its own result, or is itself: a get per message, with the message as the default)
        found: dict[int, Message] = dict(zip(map(id, looked), cast("list[Message]", results), strict=True))
        found.update({id(m): out for m, out in moved})
        self.ledger.keep_batch(listed, tuple(map(found.get, map(id, listed), listed)), generation)

    def _learn_copy(self, m: Message, key: SameMessage, entry: tuple[Message, Message, int] | None,
                    clean_ids: frozenset[str], ids_at: int, looked: list[Message]) -> None:
        """Learn from ``m``, a copy of the message of ``entry`` (``key``: its content): recalled, or redacted."""
        looked.append(m)
        # (an id may hold a secret learned since)
        ids = clean_ids if self.redactor._generation() == ids_at else frozenset()
        if self._recall(m, ids, key, entry) is None:
            self.redact_message(m)

    def _learn_fresh(self, items: list[Message]) -> None:
        """Learn from messages of content not seen before: redact those the prefilter cannot clear, record the rest.

        A message the prefilter clears holds nothing a pattern finds; recorded as clean when no remembered string
        occurs in it either (one search of the batch; else redacted), its copies and later redactions need not read
        it. (Redacting every message of the batch for the record, a secret learned late redone everywhere, cost a
        quarter more when the messages are all distinct.)
        """
        found = self._suspects(items)
        if found is None:
            for m in items:
                self.redact_message(m)  # (learning is what redacting a message does on the way)
            return
        suspects, texts = found
        start = self.redactor._generation()
        order = sorted(suspects)
        # (each suspect's ids, meta values and arguments cleared in one prefilter pass, not scanned one by one)
        with self.redactor.clearing(short_strings([items[i] for i in order], CLEARED_MAX_CHARS)):
            for i in order:
                self.redact_message(items[i])
            if self.redactor._generation() != start:
                for i in order:  # (one redacted before a secret was learned is redone if it mentions it)
                    self.redact_message(items[i])
        clear = [i for i in range(len(items)) if i not in suspects]
        generation = self.redactor._generation()
        remembered = self._remembered_of(items, texts, clear)
        if remembered is None:
            return  # (too many strings remembered to search the batch: redacted when first asked)
        for k, i in enumerate(clear):
            if k in remembered:
                self.redact_message(items[i])  # (a remembered string in it: summary and transcript need it redacted)
        self.ledger.put_clean([items[i] for k, i in enumerate(clear) if k not in remembered], generation)

    def _clean_ids(self, ids: list[Any]) -> frozenset[str]:
        """Of ``ids`` (``meta["id"]`` values), the strings the prefilter shows redact to themselves, learning nothing.

        Such an id holds no pattern's trigger or need (so no pattern finds anything in it), no remembered string,
        and its key does not name a secret (see :meth:`Redactor._redact_item`).
        """
        from .rules import SECRET_KEY

        if SECRET_KEY.fullmatch(ID_KEY):
            return frozenset()
        return self.clean_strings(ids)

    def clean_strings(self, values: Iterable[Any]) -> frozenset[str]:
        """Of ``values``, the strings the prefilter shows ``redact_text`` returns as they are, learning nothing.

        Such a string holds no pattern's trigger or need (so no pattern finds anything in it) and no remembered
        string. For many short strings (ids, meta values, arguments): they are searched joined.
        """
        distinct = dict.fromkeys(values)
        distinct.pop("", None)
        # (strings, as ids are: kept as they are, checked in one C loop)
        texts = list(distinct) if set(map(type, distinct)) <= {str} else \
            [text for text in distinct if isinstance(text, str) and text]
        if len(texts) < 2 or not self.redactor.enabled:
            return frozenset()
        scanner = self.redactor._scanner
        if scanner.prefilter is None or self.redactor.callback is not None:
            return frozenset()
        suspects: set[int] = set()
        # (searched for the triggers, then for what is remembered)
        whole = (SEPARATOR.join(texts), joined_starts(texts))
        scanner.suspect_texts(texts, suspects, joined=True, whole=whole)
        if self.redactor.remember:
            remembered = self._remembered_in(texts, whole)
            if remembered is None:  # (too many remembered strings to look for each in the joined ids)
                memory = self.redactor.memory
                remembered = {i for i, text in enumerate(texts) if i not in suspects and memory.spans(text)}
            suspects |= remembered
        # (The ids are distinct: the clean ones are all but the suspects'. 100,000 ids of a bulk add, issue 22.)
        return frozenset(texts).difference([texts[i] for i in suspects]) if suspects else frozenset(texts)

    def redact_messages(self, messages: Iterable[Message], *, kept: bool = True) -> list[Message]:
        """Every message redacted, in bulk: first every secret of the batch is learned, then each is redacted.

        The same as :meth:`learn_from` the batch, then :meth:`redact_message` one by one: a value found in context
        late in the batch is redacted where an earlier message mentions it bare. A prefilter searches all the
        messages' text at once for what any pattern needs (its trigger substrings, a base64 run) and, once the batch
        is learned, for what is remembered; a message with none of it comes back as it is, unscanned.
        ``kept=False``: neither take nor leave the batch the ledger keeps for the next call (the read-ahead's slices,
        on another thread, between a compaction's two batches).
        """
        return self.redact_messages_at(messages, kept=kept)[0]

    def redact_messages_at(self, messages: Iterable[Message], *,
                           kept: bool = True) -> tuple[list[Message], int]:
        """:meth:`redact_messages`, and the generation of the memory the result holds at.

        The generation is read before the work that made the result (a secret another thread learns after that may
        stand bare in it): a caller labelling what it derives from the result must take this one, not one it reads
        after the call (a secret learned in between would then look considered, and is not; issue 22, the race of
        ``Redactor.clearing`` fixed in the fifteenth session).
        """
        items = list(messages)
        if not self.redactor.enabled:
            return items, 0  # (nothing redacted, at any generation; the memory is not loaded for it)
        start = self.redactor._generation()
        if self.redactor.callback is not None:
            return self._redact_batch(items), start
        # Messages redacted before come back from the ledger; the others are redacted in bulk, then recorded.
        out, fresh = self._known(items, start, kept=kept)
        if fresh:
            for i, redacted in zip(fresh, self._redact_batch([items[i] for i in fresh]), strict=True):
                out[i] = redacted
        for _ in range(MAX_PASSES):
            if self.redactor._generation() == start:
                break
            # A secret learned on the way may be mentioned in a message redacted before it: each is checked for
            # the strings learned since, and redone only where one occurs.
            start = self.redactor._generation()
            out = [self.redact_message(m) for m in items]
        result = cast("list[Message]", out)  # (each one known, redacted in the batch, or redone)
        if kept and self.redactor._generation() == start:
            self.ledger.keep_batch(items, tuple(result), start)  # (a copy: the caller may change its list)
        return result, start

    def _known(self, items: list[Message], generation: int, *,
               kept: bool = True) -> tuple[list[Message | None], list[int]]:
        """What each of ``items`` redacts to, from the last batch (``kept``) or the ledger; the indexes not known."""
        batch = self.ledger.from_batch(items, generation) if kept else None
        out: list[Message | None]
        missing: Sequence[int]
        if batch is not None:
            out, missing = batch
        else:
            out, missing = [None] * len(items), range(len(items))
        if not missing:
            return out, []
        rest = items if batch is None else [items[i] for i in missing]
        stale: list[tuple[int, Message, tuple[Message, Message, int]]] = []
        others: list[tuple[int, Message]] = []
        for i, m, known in zip(missing, rest, self.ledger.current(rest, generation), strict=True):
            if known is not None:
                out[i] = known
                continue
            entry = self.ledger.own_entry(m)
            if entry is not None and entry[0] is m:
                stale.append((i, m, entry))  # (its own entry, made before something was learned)
            else:
                others.append((i, m))
        if stale:
            for (i, m, _), renewed in zip(stale, self._renewed([(m, entry) for _, m, entry in stale]), strict=True):
                if renewed is None:
                    others.append((i, m))  # (a string learned since may occur in it: as any message, below)
                else:
                    out[i] = renewed
            others.sort(key=operator.itemgetter(0))
        fresh: list[int] = []
        for i, m in others:
            found = self._recall(m)
            out[i] = found
            if found is None:
                fresh.append(i)
        return out, fresh

    def _renewed(self, stale: list[tuple[Message, tuple[Message, Message, int]]]) -> list[Message | None]:
        """What each message redacts to now, from its own ``entry`` made at an earlier generation (or None).

        None where a string learned since may occur in it (then :meth:`_recall` looks at it on its own). As
        :meth:`_recall` does message by message, with one search per earlier generation of the strings learned
        since in all the messages' texts (issue 22: the 3,000 messages add() redacted were re-checked one by one in
        the first compaction of 100,000 recorded messages, after its catch-up learned two strings).
        """
        now = self.redactor._generation()
        out: list[Message | None] = [None] * len(stale)
        by_seen: dict[int, list[int]] = {}
        for k, (_, entry) in enumerate(stale):
            by_seen.setdefault(entry[2], []).append(k)
        renewed: list[tuple[Message, Message]] = []
        for seen, indexes in by_seen.items():
            learned = self.redactor.memory.learned_since(seen) if self.redactor.remember else []
            readable: list[int] = []
            texts: list[str] = []
            for k in indexes:
                strings = surface(stale[k][0])
                if strings is not None:  # (else unsure: looked at on its own)
                    readable.append(k)
                    texts.append(SEPARATOR.join(strings))
            holding: set[int] = set()
            if learned and texts:
                search_joined(SEPARATOR.join(texts), joined_starts(texts), learned, holding)
            for n, k in enumerate(readable):
                if n not in holding:
                    m, entry = stale[k]
                    out[k] = entry[1]
                    renewed.append((m, entry[1]))
        self.ledger.renew(renewed, now)
        return out

    def _redact_batch(self, items: list[Message]) -> list[Message]:
        """:meth:`redact_messages` of messages not redacted before: learn the batch, then redact, prefiltered."""
        scans = self.redactor._scanner.scans
        # (A turn's batch, not a long history's transcript: its texts scanned before are looked up, and its cleared
        # outputs are remembered as scanned, for the digests' blanking after.)
        turn = len(items) <= _REMEMBER_CLEARED_MAX_BATCH
        found = self._suspects(items, scans if turn else None)
        if found is None:
            if self.redactor.remember:
                for m in items:
                    self.redact_message(m)
            return [self.redact_message(m) for m in items]
        suspects, texts = found
        before = self.redactor._learned
        order = sorted(suspects)
        with self.redactor.clearing(short_strings([items[i] for i in order], CLEARED_MAX_CHARS)):
            done = {i: self.redact_message(items[i]) for i in order}
        if self.redactor._learned is not before:
            done = {}  # (a secret learned on the way may be mentioned in a message redacted before it)
        generation = self.redactor._generation()
        remembered = self._remembered_of(items, texts, range(len(items)))
        if remembered is None:
            return [done[i] if i in done else self.redact_message(m) for i, m in enumerate(items)]
        suspects |= remembered
        out: list[Message] = []
        for i, m in enumerate(items):
            if i in done:
                out.append(done[i])
            elif i in suspects:
                out.append(self.redact_message(m))
            else:
                out.append(m)  # (no trigger, nothing remembered in it: clean at this generation)
                if self.redactor.callback is None:
                    self.ledger.put(m, m, generation)
                if turn and type(m.content) is str and m.content and (
                        m.role == "tool" or len(m.content) >= _KNOWN_SCAN_MIN_CHARS):
                    # Its text holds no trigger and nothing any pattern needs: no finding, as _scan would say (and
                    # scan_words records for words). A digest's blanking of the output then finds it scanned
                    # (issue 22: the read-ahead scanned again the outputs add() had cleared in bulk), and so does
                    # the next batch holding the same text (a session's system prompt is the last one's).
                    scans.put(m.content, ())
        return out

    def _suspects(self, items: list[Message],
                  scans: ScanCache | None = None) -> tuple[set[int], list[str | None]] | None:
        """The messages the patterns' prefilter cannot clear, with the texts it searched; None when it cannot work.

        Texts are each message's strings joined, in order (what :meth:`_remembered_of` searches next); None for a
        message whose arguments were decoded: those strings are made again then, not held for the whole batch. The
        texts are lowered and searched :data:`_PREFILTER_CHUNK_CHARS` at a time.

        ``scans``: the patterns' scans, where a text content of :data:`_KNOWN_SCAN_MIN_CHARS` or more is looked up
        first: scanned before (a session's system prompt, the same in the last session), its findings say whether
        the message is a suspect, and only its other strings are searched (redaction reads each string on its own).
        """
        if self.redactor._scanner.prefilter is None or self.redactor.callback is not None:
            return None
        suspects: set[int] = set()
        texts: list[str | None] = []
        chunk: list[str] = []
        chunk_chars = 0
        for i, m in enumerate(items):
            strings, decoded = read_surface(m)
            if strings is None:
                suspects.add(i)
                strings = []
            text = SEPARATOR.join(strings)
            texts.append(None if decoded else text)
            content = m.content
            if scans is not None and type(content) is str and len(content) >= _KNOWN_SCAN_MIN_CHARS and strings:
                known = scans.get(content)
                if known is not None:
                    # (read_surface gives the text content first; the prefilter reads the strings after it)
                    if known:
                        suspects.add(i)
                    text = SEPARATOR.join(itertools.islice(strings, 1, None))
            chunk.append(text)
            chunk_chars += len(text)
            if chunk_chars >= _PREFILTER_CHUNK_CHARS:
                self._suspect_chunk(chunk, i + 1 - len(chunk), suspects)
                chunk, chunk_chars = [], 0
        if chunk:
            self._suspect_chunk(chunk, len(items) - len(chunk), suspects)
        return suspects, texts

    def _suspect_chunk(self, texts: list[str], offset: int, suspects: set[int]) -> None:
        """:meth:`Scanner.suspect_texts <._scanner.Scanner.suspect_texts>` of a batch's ``texts`` from ``offset`` on."""
        scanner = self.redactor._scanner
        if not offset:
            scanner.suspect_texts(texts, suspects)
            return
        found = {i - offset for i in suspects if i >= offset}
        scanner.suspect_texts(texts, found)
        suspects.update(offset + k for k in found)

    def _remembered_of(self, items: list[Message], texts: list[str | None], indexes: Sequence[int]) -> set[int] | None:
        """:meth:`_remembered_in` of the texts :meth:`_suspects` gave for ``items[i]``, ``i`` in ``indexes``.

        The positions in ``indexes`` of those holding a remembered string; searched :data:`_PREFILTER_CHUNK_CHARS`
        at a time, a text not kept made again.
        """
        if not self.redactor._learned or not indexes:
            return set()
        holding: set[int] = set()
        chunk: list[str] = []
        chunk_chars = 0
        for k, i in enumerate(indexes):
            text = texts[i]
            if text is None:
                text = SEPARATOR.join(surface(items[i]) or ())
            chunk.append(text)
            chunk_chars += len(text)
            if chunk_chars >= _PREFILTER_CHUNK_CHARS or k + 1 == len(indexes):
                found = self._remembered_in(chunk)
                if found is None:
                    return None
                offset = k + 1 - len(chunk)
                holding.update(offset + n for n in found)
                chunk, chunk_chars = [], 0
        return holding
    def _remembered_in(self, texts: list[str], whole: tuple[str, list[int]] | None = None) -> set[int] | None:
        """Indexes of the texts holding a remembered secret, or None when too many are remembered to search.

        ``whole``: the texts joined and their :func:`~._ledger.joined_starts`, when the caller has them.
        """
        learned = self.redactor._learned
        if not learned or not texts:
            return set()
        if len(learned) > _PREFILTER_MAX_LEARNED:
            return None
        holding: set[int] = set()
        if whole is None:
            # (The ASCII texts apart: joined, they stay one byte a character and are searched in one pass; one
            # non-ASCII text in a chunk of tool outputs made the whole chunk wider, see ._ledger.search_joined.)
            ascii_flags = list(map(str.isascii, texts))
            if any(ascii_flags) and not all(ascii_flags):
                for wanted in (True, False):
                    indexes = [k for k, flag in enumerate(ascii_flags) if flag is wanted]
                    chosen = [texts[k] for k in indexes]
                    found: set[int] = set()
                    search_joined(SEPARATOR.join(chosen), joined_starts(chosen), tuple(learned), found)
                    holding.update(indexes[n] for n in found)
                return holding
        joined, starts = (SEPARATOR.join(texts), joined_starts(texts)) if whole is None else whole
        search_joined(joined, starts, tuple(learned), holding)
        return holding


# (What learn_from reads of each copy, and each plan step's group, at C speed.)
_META_OF = operator.attrgetter("meta")
_ID_ITEM = operator.itemgetter(ID_KEY)
_GROUP_OF = operator.itemgetter(0)


def _moves_by_id(entry: tuple[Message, Message, int]) -> bool:
    """Whether a copy of ``entry``'s message redacts to ``entry[1].with_id(its id)`` when its id is clean.

    What :meth:`MessageRedactor._transplant` makes of such a copy: ``entry[1]`` with the copy's meta keys, the id
    its own (the caller checks that the copy's keys come in the message's order). True when ``entry[1]`` is another
    message (not one equal to it, which this redactor does not make) with the same meta keys in the same order, and
    the message has an id.
    """
    original, redacted, _ = entry
    return (redacted is not original and ID_KEY in original.meta and list(redacted.meta) == list(original.meta)
            and redacted != original)


def _ids_of(messages: list[Message]) -> list[Any]:
    """Each message's ``meta["id"]`` (None without one), by C loops when every message has one (as a manager's do)."""
    try:
        return list(map(_ID_ITEM, map(_META_OF, messages)))
    except KeyError:
        return [m.meta.get(ID_KEY) for m in messages]


def _holds_itself(items: Sequence[object], x: object) -> bool:
    """Whether ``x`` itself (not an equal message) is one of ``items``, at C speed."""
    return any(map(operator.is_, items, itertools.repeat(x)))
