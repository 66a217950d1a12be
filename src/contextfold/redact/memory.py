"""A session's secret memory: every value redaction took out of the session's text, remembered for the session.

A summarizer lists a token without the ``password=`` that made it recognisable, a masked output's digest says "it
mentioned: X", an agent repeats a key in prose: without its context a value matches no rule. So every value a
rule finds is remembered, and later occurrences of it are redacted wherever they stand. What is remembered for a
value: the value itself when it is specific enough (:func:`rememberable`), its JSON-escaped and unescaped forms,
and its long runs of letters and digits that switch between the two (key material reformatted, a PEM body's lines).

The memory of a session lives in the session's blob store beside its tool outputs (under
``session-secrets.<hash of the session id>``), so a restarted process or another fleet worker with the same store
redacts what the session saw before. The store holds the values in clear, as it already holds the whole tool
outputs they came from. A save appends what is new as a record of its own (:mod:`._memory_records`: a base and
the records after it, merged by levels and folded into the base now and then); a load reads them all and refuses a
corrupt one. Two workers that save
at once both keep theirs: each reads what the other appended before it writes, and writes its record only where no
key is (``BlobStore.put_new``: the loser writes it again under the next number). A fold or a merge notes through
which record it passed (``passed_key``) before it deletes what it passed over: a worker whose next number was stale
(its record lands where no load reads) sees its number at or below the note, reads the store again and appends
after the newest; a fold or a merge that cannot raise the note deletes nothing (and takes back what it wrote). A
merge writes its run only where no key is: one there is another worker's merge of the same records, left alone.
The note and the bases are written (and a previous base deleted) only over what was read (``BlobStore.put_if``, a
compare-and-set): another worker's write in between makes this one read the store again.
All of this holds only where ``put_new`` and ``put_if`` are one step for the store (those of
:mod:`contextfold.stores` are); a store that keeps the protocol's defaults (read, then write) is said to be one, by
its class's name, once a process (:func:`tell_if_not_atomic`).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
import re
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._memo import TextMemo, text_key
from ..errors import CorruptRecord
from ._memory_records import (
    FAN_IN,
    MAX_LEVEL,
    Record,
    base_key,
    decode_record,
    encode_record,
    key_at,
    note_passed,
    over_cut_run,
    passed,
    put_if,
    put_new,
    record_place,
    run_key,
    run_records,
    segment_key,
    stored_bytes,
    stored_record,
    sweep_merged,
    sweep_range,
    tell_if_not_atomic,
)

if TYPE_CHECKING:
    from ..cache.blobs import BlobStore

__all__ = [
    "LEARN_MIN_CHARS", "MAX_LEARNED", "MEMORY_KEY_PREFIX", "MIN_VALUE_CHARS", "PIECE_CHARS", "SecretMemory",
    "memory_key", "memory_saved_at", "rememberable",
]

# A run of letters and digits at least this long that switches between them at least twice is remembered on its own
# (a PEM body line, a token inside a reformatted value). Shorter or single-class runs are too common.
LEARN_MIN_CHARS = 12
_RUN_RE = re.compile(rf"[A-Za-z0-9]{{{LEARN_MIN_CHARS},}}")
_LEARN_MIN_SWITCHES = 2
_SWITCH_RE = re.compile(r"(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")
# A whole value is remembered when it is at least this long and not a plain lower-case word (`postgres` in a test
# config must not be redacted from every later mention of the database); lower-case values from this length on
# are specific enough (`mysupersecretjwtsigningkey`).
MIN_VALUE_CHARS = 6
_LOWER_WORD_CHARS = 12
_LOWER_WORD = re.compile(r"[a-z]+")
# Remembered strings at most: a redactor shared by many sessions must not grow without bound. A full memory learns
# nothing more: a secret found after that is redacted where a rule finds it, but its bare repeats are not (4,096 was
# reached by ~2,050 distinct tokens, ~400 passwords with punctuation: a long agent session's; said once when full).
# Each value brings its encoded forms: 16,384 hold ~3,270 AWS-style 40-character keys or ~2,800 random 16-character
# passwords with punctuation (~4,500 of each before the everyday encoders' forms, ~30-40% fewer since).
# Each learn copies the table (readers never see it change): filling 16,384 costs ~1.5 s of a session's CPU.
MAX_LEARNED = 16_384
# A secret found inside JSON text (tool-call arguments) still has its escapes: `\nMIIE...` must teach `MIIE...`.
_JSON_ESCAPE_RE = re.compile(r"\\(?:[nrtbf/\"\\]|u[0-9a-fA-F]{4})")
_MARKER_RE = re.compile(r"\[REDACTED:[^\]\n]*\]")
# What Go's encoding/json escapes beyond JSON's own (HTML-safe by default), and a URL's percent escapes with a letter.
_GO_JSON_RE = re.compile("[&<>\u2028\u2029]")
_PERCENT_HEX_RE = re.compile(r"%(?:[0-9A-F][A-F]|[A-F][0-9])")
_URL_MARKS = frozenset("!'()*")  # what JavaScript's and .NET's URL encoders leave unescaped and Python's quote() not
# A line of a multi-line secret remembered on its own: 12 characters or more of base64 with letters and digits.
_LINE_SPLIT_RE = re.compile(r"\s*(?:\n|\\n)\s*")
_KEY_LINE_RE = re.compile(r"(?=[^\n]*[0-9])(?=[^\n]*[A-Za-z])[A-Za-z0-9+/=_-]{12,}")
# A word sharing this many consecutive characters with a remembered string is a piece of a secret (the corpus test's
# measure of a leak: no 5-character piece of a value left).
PIECE_CHARS = 5
# What spans() found in a text, by the text's hash: at most this many bytes a session (about 8,000 texts).
_FOUND_MEMO_BYTES = 2 * 1024 * 1024
_HIT_BYTES = 64
# Texts up to this long are first searched position by position (SecretMemory._short_hits) when more strings are
# remembered than the text has characters; otherwise string by string.
_SHORT_TEXT_CHARS = 512
# From this many remembered strings every text is searched position by position: a find per string costs more
# than a look-up per position, whatever the text's length (4,000 strings: 15 ms a 20,000-character text, ~1.5 by
# position), and the cost stays that of the text's length however many strings a long session remembers.
_BY_POSITION_FROM = 1024
# The store key's prefix: not a ref id, a claim or a line index, so retention and GC leave it alone.
_KEY_PREFIX = "session-secrets."
# The store keys of memories start with it, followed by the session's owner tag (cache.owners.owner_tag): retention
# ages a memory with the outputs of its session (issue 21: the secrets in clear outlived every output).
MEMORY_KEY_PREFIX = _KEY_PREFIX
# Bytes of appended records before they are folded into the base even when it is smaller (the first saves).
_FOLD_MIN_BYTES = 64 * 1024
# Records a save writes at most when other workers keep taking its number (one retry in practice).
_MAX_APPEND_TRIES = 8
# Times a load reads the store again when it stopped below the passed-over note (a fold or merge of another worker
# deleting what it was reading), and times a fold writes again when another worker's fold took its base slot.
_MAX_READ_TRIES = 4
_MAX_FOLD_TRIES = 4


_log = logging.getLogger(__name__)


def memory_key(session_id: str) -> str:
    """The blob-store key of ``session_id``'s secret memory (the session id itself never appears in a key)."""
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return _KEY_PREFIX + digest


def rememberable(value: str) -> bool:
    """Whether ``value`` is specific enough to be redacted wherever it occurs later."""
    stripped = value.strip()
    if len(stripped) < MIN_VALUE_CHARS or _MARKER_RE.search(stripped):
        return False
    return not (_LOWER_WORD.fullmatch(stripped) and len(stripped) < _LOWER_WORD_CHARS)


def _learnable_run(run: str) -> bool:
    return len(_SWITCH_RE.findall(run)) >= _LEARN_MIN_SWITCHES


def _unescaped(value: str) -> str | None:
    """``value`` with its JSON escapes read (an escaped quote becomes a quote), or None when it has none."""
    if "\\" not in value:
        return None
    try:
        text = json.loads(f'"{value}"')
    except ValueError:
        return None
    return text if isinstance(text, str) and text != value else None


def _encoded(value: str) -> list[str]:
    """How ``value`` reads once a tool or a format encoded it: JSON, URL, HTML and base64 forms.

    The value, taught once in context (``password: X``), comes back in another tool's output as a query string, a
    JSON file written with ``ensure_ascii``, an HTML page or a base64 field: each form is remembered with it. base64
    without its padding, which depends on what follows.
    """
    encoded = base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii").rstrip("=")
    as_json, as_ascii_json = json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value, ensure_ascii=True)[1:-1]
    quoted = urllib.parse.quote(value, safe="", errors="surrogatepass")
    quoted_plus = urllib.parse.quote_plus(value, safe="", errors="surrogatepass")
    return [as_json, as_ascii_json, quoted, quoted_plus,
            html.escape(value, quote=False), html.escape(value, quote=True),
            encoded, encoded.replace("+", "-").replace("/", "_"),
            # The forms everyday encoders write besides (each differs from one above only for a value holding the
            # characters it treats apart, so other values remember nothing more): PHP's json_encode escapes "/",
            # Go's encoding/json escapes & < > as \u00XX, Python's quote() keeps "/", .NET's UrlEncode writes
            # lowercase hex.
            as_ascii_json.replace("/", "\\/"), _GO_JSON_RE.sub(_go_json_escape, as_json),
            urllib.parse.quote(value, errors="surrogatepass"),
            _PERCENT_HEX_RE.sub(_lower, quoted), _PERCENT_HEX_RE.sub(_lower, quoted_plus),
            *_url_forms_keeping_marks(value)]


def _url_forms_keeping_marks(value: str) -> list[str]:
    """The URL forms of encoders that leave ``! ' ( ) *`` as they are, for a value holding one of them (else none).

    JavaScript's encodeURIComponent keeps all five; .NET's WebUtility.UrlEncode and HttpUtility.UrlEncode keep
    ``! ( ) *``, write a space as ``+``, and the latter lowercase hex: ``Hunter2!xyz#9`` is ``Hunter2!xyz%239``.
    """
    if not _URL_MARKS.intersection(value):
        return []
    dotnet = urllib.parse.quote_plus(value, safe="!()*", errors="surrogatepass")
    return [urllib.parse.quote(value, safe="!'()*", errors="surrogatepass"), dotnet,
            _PERCENT_HEX_RE.sub(_lower, dotnet)]


def _go_json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _lower(match: re.Match[str]) -> str:
    return match.group().lower()


def forms(value: str) -> list[str]:
    """The strings that stand for ``value`` in text: itself, its encoded forms, and its long letter/digit runs."""
    out: list[str] = []
    if rememberable(value):
        out.append(value.strip())
        unescaped = _unescaped(value.strip())
        if unescaped is not None and rememberable(unescaped):
            out.append(unescaped)
        out.extend(form for form in _encoded(value.strip()) if form != value.strip())
    plain = _JSON_ESCAPE_RE.sub(" ", value) if "\\" in value else value
    out.extend(r for r in _RUN_RE.findall(plain) if _learnable_run(r))
    # Each line of a key block (a PEM body line), whole: a page or a grep that starts inside the block shows lines
    # without the header that made them recognisable, and base64's + and / cut them into runs too short to keep.
    if "\n" in value or "\\n" in value:
        out.extend(line for line in _LINE_SPLIT_RE.split(value) if _KEY_LINE_RE.fullmatch(line))
    return list(dict.fromkeys(out))


class SecretMemory:
    """The secrets of one session: remembered strings and the kind each stands for, optionally kept in a store.

    Copy-on-write: exporter threads read :attr:`table` while the agent's thread learns; readers never see a dict
    change, and a new table object means something was learned (callers compare identities).

    Args:
        store: The session's blob store; None keeps the memory in this process only.
        session_id: Names the session in the store (required with ``store``).
    """

    def __init__(self, store: BlobStore | None = None, session_id: str | None = None) -> None:
        if store is not None and session_id is None:
            raise ValueError("SecretMemory: a store needs the session_id whose secrets it keeps")
        self._table: dict[str, str] = {}
        self._values: dict[str, str] = {}  # the values found, as they were (what the store keeps)
        self._lock = threading.RLock()
        self._store = store
        if store is not None:
            tell_if_not_atomic(store)
        self._key = memory_key(session_id) if session_id is not None else None
        self._loaded = store is None
        self._loading = False  # (the thread holding the lock is loading: see _load)
        self._learning_stored = False  # (the thread holding the lock learns what a read found: see _learn_stored)
        self._unsaved = False
        self._unsaved_values: dict[str, str] = {}  # learned here since the last save (what the next one appends)
        # Values known only from other workers' records a save read (not written by this worker): one of those may
        # be a record appended where a fold or merge had passed, deleted by its writer before it writes it again.
        # Learned here later, such a value is this worker's to write too (see learn).
        self._read_only: set[str] = set()
        # The stored layout as this process knows it: the base (of ``_base_bytes``) holds the records up to
        # ``_through``; ``_runs`` follow it (records and merged runs, oldest first); the next record is ``_next``.
        self._through = self._base_bytes = 0
        self._runs: list[_Run] = []
        self._next = 1
        self._slot = 0  # (which base is the current one: 0, or 1 for <memory key>.b)
        # The highest passed-over note this worker read with the layout or wrote itself: one above it was raised by
        # another worker's fold or merge since, and this worker's view of the base may be stale (see _merge_levels).
        self._note_seen = 0
        # The passed-over note as this save read it after appending (None: not read in this save); a merge right
        # after raises it without reading it again (issue 22: a read per merge, ~10% of many small saves' CPU).
        # The store's count of possible losses when the memory was last saved (a Redis restarted empty forgets it).
        self._losses_at_save = _losses(store)
        self._order: list[tuple[str, str]] = []  # the table's entries in the order learned (spans' memo counts them)
        self._found: TextMemo[tuple[int, tuple[tuple[int, int, str], ...]]] = TextMemo(_FOUND_MEMO_BYTES)
        # The remembered strings by their first PIECE_CHARS characters (spans of short texts).
        self._by_head: dict[str, list[tuple[str, str]]] = {}
        # Every piece of PIECE_CHARS characters of the first ``_grams_of`` strings of ``_order`` (shares_piece).
        self._grams: set[str] = set()
        self._grams_of = 0
        self._full_told = False  # (a full memory is said once)

    # -- reading ------------------------------------------------------------------------------------------------
    @property
    def table(self) -> Mapping[str, str]:
        """Remembered string -> the kind of secret it stands for (loads the stored memory on first use)."""
        if not self._loaded:
            self._load()
        return self._table

    def __len__(self) -> int:
        return len(self.table)

    @property
    def generation(self) -> int:
        """How many strings were remembered so far; it only grows.

        A redaction made at a generation still holds unless a string remembered since (:meth:`learned_since`)
        occurs in what was redacted.
        """
        if not self._loaded:
            self._load()
        return len(self._order)

    def learned_since(self, generation: int) -> list[str]:
        """The strings remembered after :attr:`generation` was ``generation``, oldest first."""
        return [remembered for remembered, _ in self._order[generation:]]

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """``(start, end, kind)`` of every remembered string in ``text``, left to right, without overlaps.

        Where two overlap, the one starting first wins, and of two starting together the longer. The same text is
        redacted again and again (every transcript, every export): what was found in it is remembered by its hash,
        and a later call looks only for the strings learned since.
        """
        if not self._loaded:
            self._load()
        order = self._order
        learned = len(order)  # (a snapshot: another thread may learn meanwhile; appends never move what is there)
        if not learned or not text:
            return []
        key = text_key(text)
        searched, hits = self._found.get(key) or (0, ())
        if searched < learned:
            # Position by position only when there are more strings to look for than positions to look at: with a
            # few remembered strings, a find each is far cheaper (issue 22: 20% of learning 100,000 distinct messages).
            if not searched and (learned >= _BY_POSITION_FROM or (len(text) <= _SHORT_TEXT_CHARS and
                                                                   learned > len(text))):
                more = self._short_hits(text)
            else:
                more = list(hits)
                for remembered, kind in order[searched:learned]:
                    at = text.find(remembered)
                    while at >= 0:
                        more.append((at, -(at + len(remembered)), kind))
                        at = text.find(remembered, at + 1)
            hits = tuple(more)
            self._found.put(key, (learned, hits), _HIT_BYTES * (1 + len(hits)))
        if not hits:
            return []
        out: list[tuple[int, int, str]] = []
        last = -1
        for start, neg_end, kind in sorted(hits):
            if start >= last:
                out.append((start, -neg_end, kind))
                last = -neg_end
        return out

    def _short_hits(self, text: str) -> list[tuple[int, int, str]]:
        """Every remembered string in a short text (an event's field, a word) as ``(start, -end, kind)``.

        Each position is looked up by its first characters: cheaper than looking for each of hundreds of remembered
        strings in a few dozen characters. (A string learned meanwhile may be found twice: a duplicate is harmless.)
        """
        heads = self._by_head
        out: list[tuple[int, int, str]] = []
        for i in range(len(text) - PIECE_CHARS + 1):
            candidates = heads.get(text[i : i + PIECE_CHARS])
            if candidates:
                out.extend((i, -(i + len(remembered)), kind) for remembered, kind in candidates
                           if text.startswith(remembered, i))
        return out

    def shares_piece(self, text: str) -> bool:
        """Whether ``text`` shares :data:`PIECE_CHARS` consecutive characters with a remembered string."""
        if len(text) < PIECE_CHARS:
            return False
        if not self._loaded:
            self._load()
        order = self._order
        if self._grams_of < len(order):
            with self._lock:  # (the pieces of what was learned since the last call, added once)
                learned = len(order)
                for remembered, _ in order[self._grams_of : learned]:
                    self._grams.update(remembered[i : i + PIECE_CHARS]
                                       for i in range(len(remembered) - PIECE_CHARS + 1))
                self._grams_of = max(self._grams_of, learned)
        grams = self._grams
        if not grams:
            return False  # (nothing remembered: most sessions; every word a digest lists is asked)
        return any(text[i : i + PIECE_CHARS] in grams for i in range(len(text) - PIECE_CHARS + 1))

    def values(self) -> dict[str, str]:
        """The values learned (each with its kind), as found."""
        if not self._loaded:
            self._load()
        return dict(self._values)

    # -- learning -----------------------------------------------------------------------------------------------
    def learn(self, value: str, kind: str) -> bool:
        """Remember ``value`` (see :func:`forms`); True when something new was remembered."""
        strings = forms(value)
        if not strings:
            return False
        if not self._loaded:
            self._load()
        with self._lock:
            fresh = {s: kind for s in strings if s not in self._table}
            if not fresh:
                if value in self._read_only and not self._loading and not self._learning_stored:
                    # Found here too, but known only from another worker's record: written by this worker as well
                    # (a few bytes), or its save said stored while that record was one its writer was taking back
                    # (the seventeenth stop's shared-values stress: 1 of 300 seeds).
                    self._read_only.discard(value)
                    self._unsaved = True
                    self._unsaved_values[value] = self._values.get(value, kind)
                return False
            if len(self._table) + len(fresh) > MAX_LEARNED:
                if not self._full_told:
                    self._full_told = True
                    _log.warning("a session's secret memory is full (%d strings): secrets found from now on are "
                                 "redacted where a rule finds them, not where they are repeated bare",
                                 len(self._table))
                return False
            self._table = {**self._table, **fresh}
            self._order.extend(fresh.items())
            for remembered, fresh_kind in fresh.items():
                self._by_head.setdefault(remembered[:PIECE_CHARS], []).append((remembered, fresh_kind))
            self._values[value] = kind
            if self._store is not None:
                self._unsaved = True
                self._unsaved_values[value] = kind
            return True

    def learn_all(self, values: Mapping[str, str]) -> bool:
        """Remember every ``value -> kind`` of ``values``; True when something new was remembered."""
        new = False
        for value, kind in values.items():
            new = self.learn(value, kind) or new
        return new

    # -- the store ----------------------------------------------------------------------------------------------
    def _load(self) -> None:
        with self._lock:
            if self._loaded or self._loading:
                return  # (loaded; or this thread's own load, learning what it read: that must not load again)
            # Marked loaded only once what the store holds is learned: the readers of other threads look at the mark
            # without the lock, and one that saw it early read the memory empty (a remembered secret went out bare in
            # an event the telemetry thread redacted during the first call's load; red team 17). They wait here.
            self._loading = True
            try:
                values = self._read_whole()
                self._note_read_only(self._runs)
                self._learn_stored(values)
            finally:
                self._loading = False  # (a corrupt record is refused at every use, not forgotten after the first)
            self._loaded = True

    def _note_read_only(self, runs: Iterable[_Run]) -> None:
        """Note the values of other workers' records among ``runs`` (just read) that this worker does not know yet.

        Records only (level 0), not merged runs or bases: a record may be one appended where a fold or merge had
        passed, which its writer deletes and writes again after the newest (see :meth:`_append`); a merge or a fold
        wrote what it read. A restarted worker that finds such a value again writes it again (a few bytes).
        """
        known = self._values
        self._read_only.update(value for run in runs if not run.level for value in run.secrets if value not in known)

    def _learn_stored(self, values: Mapping[str, str]) -> None:
        """Learn what the store holds (nothing of it is saved again).

        Not "found here" (see :meth:`learn`): a save reading another worker's record again kept no value of it
        ``_read_only``, and the value this worker then found itself was not written by it (review of lane S).
        """
        self._learning_stored = True
        try:
            for value, kind in values.items():
                self.learn(value, kind)
                self._unsaved_values.pop(value, None)
        finally:
            self._learning_stored = False
        self._unsaved = bool(self._unsaved_values)

    @classmethod
    def of_store(cls, store: BlobStore) -> SecretMemory:
        """A memory (kept in this process) of every secret any session of ``store`` remembered there.

        For reading a store's outputs outside any session (``contextfold cache read``): each output may hold what
        one of the sessions that saw it learned.
        """
        memory = cls()
        for info in store.entries():
            if info.key.startswith(_KEY_PREFIX):
                record = stored_record(store, info.key)
                if record is not None:
                    memory.learn_all(record.secrets)
        return memory

    def _read(self) -> dict[str, str]:
        """The values the store holds for this session: its base, then the records appended after it.

        Raises CorruptRecord (naming the store and the key) for a record that is not whole or not what contextfold
        writes, but for the newest record cut short: a save that never finished (the next save writes it again).
        """
        store, key = self._store, self._key
        assert store is not None and key is not None
        values: dict[str, str] = {}
        self._through = self._base_bytes = self._slot = 0
        self._runs = []
        bases: list[tuple[int, float, int, Record, int]] = []
        cut: list[str] = []
        for slot in (0, 1):
            raw = stored_bytes(store, base_key(key, slot))
            if raw is None:
                continue
            base = decode_record(raw, record_place(store, base_key(key, slot)))
            if base is None:
                cut.append(base_key(key, slot))
            else:
                bases.append((base.through, base.saved_at or 0.0, slot, base, len(raw)))
        if len(cut) > 1:
            raise CorruptRecord(f"{record_place(store, key)}: both bases are cut short")
        for place in cut:  # (a fold, or the first save, that never finished: the other base is read)
            _log.warning("%s: the base is cut short (a save that never finished); left out", record_place(store, place))
        if bases:
            self._through, _, self._slot, base, self._base_bytes = max(bases, key=lambda b: (b[0], b[1]))
            values.update(base.secrets)
        self._next = self._read_appended(self._through + 1, values)
        return values

    def _read_whole(self) -> dict[str, str]:
        """``_read``, again while it stopped below the passed-over note (bounded); past a gap the note says is lost.

        A load that stops at a record another worker's fold or merge passed over read while that worker deleted
        what it holds: read again, it finds the new base or run. Still stopped below the note, it reads on past the
        gap (:meth:`_read_past_gap`: a run aligned to an older base, or later records).
        """
        store, key = self._store, self._key
        assert store is not None and key is not None
        # Staleness is judged by the note read BEFORE the layout (what the layout is at least as new as): one read
        # after it may be another worker's fold in between, and taken as seen, no later check would find this
        # worker's base stale (its merges then land aligned to the old base: every load reads past a gap).
        before = passed(store, key)
        values = self._read()
        for _ in range(_MAX_READ_TRIES):
            note = passed(store, key)
            if note < self._next:
                self._note_seen = max(self._note_seen, before)
                return values
            before = note
            values = self._read()
        note = passed(store, key)
        self._note_seen = max(self._note_seen, before)
        while self._next <= note:
            self._next = self._read_past_gap(self._next, note, values)
        return values

    def _read_past_gap(self, gap: int, note: int, values: dict[str, str]) -> int:
        """Read on from record ``gap``, where no record or run aligned to the base starts and the note passed.

        A merge of a worker whose base was stale (another worker folded meanwhile) writes its run aligned to the older
        base: a load from the new base finds nothing where it looks, though the values are in the store (review of
        the sixteenth session: up to half of them, with 4 workers). So the run that covers ``gap`` is looked for
        wherever one of each level can start (the highest level first), then any record or run starting after it
        up to the note. What no key covers is lost (a fold of another worker replaced the base holding it): read past,
        or every later save would be invisible too. Only past a gap: up to 585 reads a gap for the run covering it
        (every start of every level: 1 + 8 + 64 + 512), then 4 per record from it up to the note (each level's start).
        """
        store, key = self._store, self._key
        assert store is not None and key is not None
        run = self._covering(gap)
        n = gap
        while run is None and n < note:
            n += 1
            run = next((found for level in range(MAX_LEVEL, -1, -1) if (found := self._run_at(n, level))), None)
        if n > gap or run is None:
            # (Not "missing": a number is also left empty by an append passed over and written again after the
            # newest, or by a merge abandoned. Only a fold that was overtaken loses what it held.)
            _log.warning("%s: no record or run holds numbers %d to %d, below the passed-over note %d (numbers left "
                         "empty, or records replaced by a fold that was overtaken); read past them",
                         record_place(store, key), gap, n - 1 if run is not None else note, note)
        if run is None:
            return self._read_appended(note + 1, values)
        values.update(run.secrets)
        self._runs.append(run)
        return self._read_appended(run.start + run_records(run.level), values)

    def _covering(self, n: int) -> _Run | None:
        """A run (of any alignment, the highest level and the latest start first) or the record holding record ``n``."""
        for level in range(MAX_LEVEL, -1, -1):
            for start in range(n, max(n - run_records(level), 0), -1):
                run = self._run_at(start, level)
                if run is not None:
                    return run
        return None

    def _run_at(self, start: int, level: int) -> _Run | None:
        """The whole run of ``level`` (a record: 0) stored from record ``start`` on, or None."""
        store, key = self._store, self._key
        assert store is not None and key is not None
        place = key_at(key, start, level)
        raw = stored_bytes(store, place)
        record = None if raw is None else decode_record(raw, record_place(store, place))
        if raw is None or record is None:
            return None
        if level and record.through != start + run_records(level) - 1:
            raise CorruptRecord(f"{record_place(store, place)}: holds the records through {record.through}, not "
                                f"the {run_records(level)} from {start}")
        return _Run(place, start, level, len(raw), record.secrets)

    def _read_appended(self, start: int, values: dict[str, str]) -> int:
        """Read the records and runs from record number ``start`` on into ``values``; the number of the next one."""
        n = start
        while (run := self._read_at(n)) is not None:
            values.update(run.secrets)
            self._runs.append(run)
            n = run.start + run_records(run.level)
        return n

    def _read_at(self, n: int) -> _Run | None:
        """The run (or the record) that starts at record number ``n``, the highest level first; None when none.

        A run cut short is a merge that never finished: the records (or runs) it merges are still there, and read.
        """
        store, key = self._store, self._key
        assert store is not None and key is not None
        offset = n - self._through - 1
        cut_run = None
        for level in range(MAX_LEVEL, 0, -1):
            if offset % run_records(level):
                continue  # (no run of this level can start here)
            place = run_key(key, n, level)
            raw = stored_bytes(store, place)
            if raw is None:
                continue
            record = decode_record(raw, record_place(store, place))
            if record is None:
                _log.warning("%s: a merged run is cut short (a merge that never finished); what it merges is read",
                             record_place(store, place))
                cut_run = place
                continue
            if record.through != n + run_records(level) - 1:
                raise CorruptRecord(f"{record_place(store, place)}: holds the records through {record.through}, not "
                                    f"the {run_records(level)} from {n}")
            return _Run(place, n, level, len(raw), record.secrets)
        place = segment_key(key, n)
        raw = stored_bytes(store, place)
        if raw is not None:
            record = decode_record(raw, record_place(store, place))
            if record is not None:
                return _Run(place, n, 0, len(raw), record.secrets)
            if stored_bytes(store, segment_key(key, n + 1)) is not None:
                raise CorruptRecord(f"{record_place(store, place)}: the record is cut short, and records follow it")
            _log.warning("%s: the newest record is cut short (a save that never finished); left out",
                         record_place(store, place))
        if cut_run is not None:
            raise CorruptRecord(f"{record_place(store, cut_run)}: the run is cut short, and the records it merges "
                                "are gone")
        return None

    def save(self) -> bool:
        """Append what was learned since the last save to the store; True when written.

        What other workers appended meanwhile is read first (and known here from then on). A store that may have
        lost what it held (a Redis restarted empty) gets everything again, as a new base.
        """
        if self._store is None:
            return False
        losses = _losses(self._store)
        forgot = losses != self._losses_at_save
        if not self._unsaved and (not forgot or not self._values):
            return False
        with self._lock:
            if not self._loaded:
                self._load()
            self._losses_at_save = losses
            if forgot:
                self._learn_stored(self._read_whole())
                self._fold()
                self._unsaved_values.clear()
                self._unsaved = False
                return True
            # What this worker learned stays to be written by it, even where a read finds it in another worker's
            # record: that record may be one appended where a fold or merge had passed (no load reads it), whose
            # writer dies before writing it again; a value taken as saved from it was lost (sixteenth stop's "left
            # out"). Written again here it costs a few bytes, when another worker found the same value.
            mine = dict(self._unsaved_values)
            if self._next == 1 and not self._base_bytes and self._first_base():
                return True
            stored = False
            for _ in range(_MAX_APPEND_TRIES):
                theirs: dict[str, str] = {}
                read_from = len(self._runs)
                self._next = self._read_appended(self._next, theirs)
                self._note_read_only(self._runs[read_from:])
                self._learn_stored(theirs)
                self._unsaved_values.update(mine)
                appended = self._append(self._next)
                if appended is None:  # (written where another worker's fold or merge had passed: read all again)
                    values = self._read_whole()
                    self._note_read_only(self._runs)
                    self._learn_stored(values)
                    self._unsaved_values.update(mine)
                elif appended:
                    stored = True
                    break
            if not stored:  # (kept unsaved: the next save tries again)
                self._unsaved = True
                _log.warning("%s: the secrets learned were not saved (other workers kept passing over the record)",
                             record_place(self._store, self._key or ""))
                return False
            self._unsaved_values.clear()
            self._unsaved = False
            self._merge_levels()
            if sum(run.size for run in self._runs) >= max(self._base_bytes, _FOLD_MIN_BYTES):
                self._fold()
            return True

    def _append(self, n: int) -> bool | None:
        """Write what is unsaved as record ``n``; False when another worker's record is there already.

        None when another worker's fold or merge passed over ``n`` (this worker's next number was stale): no load
        would read the record, so it is deleted again (the caller reads the store anew and appends after it). Kept
        until that append instead, other workers' loads read on through its number as if no fold or merge had passed
        there (the seventeenth stop's stress lost a value so): what another worker read from it, that worker writes
        again itself (see :meth:`save`).
        """
        store, key = self._store, self._key
        assert store is not None and key is not None
        raw = encode_record(self._unsaved_values.items(), time.time())
        if not put_new(store, segment_key(key, n), raw):
            held = stored_bytes(store, segment_key(key, n))
            if held is not None and decode_record(held, record_place(store, segment_key(key, n))) is not None:
                return False  # (two workers appended under one number: ours is written again under the next)
            if not put_if(store, segment_key(key, n), raw, held):  # (a record cut short there: a save that never
                return False  # finished, unless another worker's record replaced it since)
        if passed(store, key) >= n:
            store.delete(segment_key(key, n))
            return None
        self._runs.append(_Run(segment_key(key, n), n, 0, len(raw), dict(self._unsaved_values)))
        self._next = n + 1
        return True

    def _merge_levels(self) -> None:
        """Merge the newest ``FAN_IN`` runs of one level into one of the next, as long as there are such.

        The merged run is written whole before what it merges is deleted: a merge cut short leaves them as they were
        (a load reads them); a process killed before the deletes leaves runs the merged one holds (never read again),
        deleted when the merged run is merged or folded in turn (:func:`sweep_merged`). A merge whose note other
        workers kept changing below its ``through`` is abandoned (see :func:`note_passed`).
        """
        store, key = self._store, self._key
        assert store is not None and key is not None
        runs = self._runs
        while len(runs) >= FAN_IN:
            group = runs[-FAN_IN:]
            level, start = group[0].level, group[0].start
            if (level >= MAX_LEVEL or any(r.level != level for r in group)
                    or any(r.start != start + i * run_records(level) for i, r in enumerate(group))
                    or (start - self._through - 1) % run_records(level + 1)):
                return  # (also a layout another worker's records made: left as it is, folded with the rest)
            merged: dict[str, str] = {}
            for run in group:
                merged.update(run.secrets)
            place = run_key(key, start, level + 1)
            through = start + run_records(level + 1) - 1
            raw = encode_record(merged.items(), time.time(), through=through)
            if not put_new(store, place, raw) and not over_cut_run(store, place, raw):
                # Another worker's merge of this group wrote it (the same records): theirs, never overwritten nor
                # deleted here (overwritten, then taken back by this merge's abandon, it lost the records that worker
                # had deleted after its note passed: review of the sixteenth session). The store is read again.
                self._learn_stored(self._read_whole())
                return
            # (before the deletes: see _append; read now, never lowered)
            raised = note_passed(store, key, through, stale_above=self._note_seen)
            if not raised:
                # Not raised: a late record among the group's numbers would land where no load reads. The merge is
                # abandoned, its run deleted (its own: written where no key was); the group stays. Or another worker
                # folded or merged since this one read the store: its base may be stale here, and a run aligned to it
                # is not where a load from the new base looks (review of the sixteenth session).
                put_if(store, place, None, raw)
                if raised is None:
                    self._learn_stored(self._read_whole())
                return
            self._note_seen = max(self._note_seen, through)
            for run in reversed(group):  # (last first: a merge cut short among its deletes leaves the first)
                sweep_merged(store, key, run.start, run.level)  # (what a merge of it cut short left: see there)
                store.delete(run.key)
            runs[-FAN_IN:] = [_Run(place, start, level + 1, len(raw), merged)]

    def _first_base(self) -> bool:
        """The first save of a memory the store does not hold: written as its base (one key for most sessions).

        False when another worker's base replaced it at once (learned here: ours is then appended after it).
        """
        store, key = self._store, self._key
        assert store is not None and key is not None
        if store.exists(key) or store.exists(base_key(key, 1)):  # (another worker saved since this one loaded)
            self._learn_stored(self._read_whole())
            return False
        raw = encode_record(self._values.items(), time.time(), through=0)
        if not put_new(store, key, raw):
            self._learn_stored(self._read_whole())
            return False
        if passed(store, key) > 0:  # (a fold moved the base to the other slot and deleted this one meanwhile)
            put_if(store, key, None, raw)  # (unless another worker's fold wrote that slot since)
            self._learn_stored(self._read_whole())
            return False
        self._base_bytes = len(raw)
        self._unsaved_values.clear()
        self._unsaved = False
        return True

    def _fold(self) -> None:
        """Write every value known here as a base, holding the records so far; then delete what it holds.

        Into the base slot the current base is not in, whole, before the deletes (the records and runs it holds,
        then the previous base): a fold cut short leaves the current base and what follows it as they were; a
        process killed before the deletes leaves keys the new base holds already (never read again; deleted by the
        next fold). The slot is written only where no key is (``put_new``): a base there holding more than the
        current one is another worker's fold that overtook this one (read, and this fold goes on from it); one
        holding no more is left from a fold killed before its deletes (its values are learned, then written over, and
        the keys that fold left after it are deleted: :func:`sweep_range`).
        """
        store, key = self._store, self._key
        assert store is not None and key is not None
        for _ in range(_MAX_FOLD_TRIES):
            left_through: int | None = None  # (a base a fold killed before its deletes left in the slot: its through)
            note = passed(store, key)
            if note >= self._next or note > self._note_seen:  # (another worker folded or merged since it was read)
                self._learn_stored(self._read_whole())
            through, previous_through = self._next - 1, self._through
            previous = base_key(key, self._slot) if self._base_bytes else None
            slot = 1 - self._slot if self._base_bytes else 0
            place = base_key(key, slot)
            raw = encode_record(self._values.items(), time.time(), through=through)
            if not put_new(store, place, raw):
                held_raw = stored_bytes(store, place)
                held = None if held_raw is None else decode_record(held_raw, record_place(store, place))
                if held is not None and held.through > previous_through:
                    self._learn_stored(self._read_whole())
                    continue
                if held is not None:
                    self._learn_stored(held.secrets)
                    left_through = held.through
                    raw = encode_record(self._values.items(), time.time(), through=through)
                # (only over what was read: another worker's fold landing in this slot since is read, not lost)
                if not put_if(store, place, raw, held_raw):
                    self._learn_stored(self._read_whole())
                    continue
            if through and not note_passed(store, key, through):  # (before the deletes: a late record must see it)
                # Not raised: a late record among the numbers folded would land where no load reads. The fold is
                # abandoned, its base deleted (unless another worker's fold wrote that slot since); the rest stays.
                put_if(store, place, None, raw)
                return
            self._note_seen = max(self._note_seen, through)
            for run in self._runs:
                sweep_merged(store, key, run.start, run.level)
                store.delete(run.key)
            if left_through is not None:
                # The fold that wrote the current base was killed before its deletes (or an overtaken fold wrote an
                # older base beside it): what lies between the two bases is read by no load.
                sweep_range(store, key, left_through, previous_through)
            if previous is not None and previous != place:
                held_raw = stored_bytes(store, previous)  # (unless another worker's fold wrote it since: read first)
                held = None if held_raw is None else decode_record(held_raw, record_place(store, previous))
                if held_raw is not None and (held is None or held.through <= previous_through):
                    # (the store holds the memory once, not twice until the next fold; deleted only as read: a fold
                    # of another worker writing the slot between the read and the delete keeps its base)
                    put_if(store, previous, None, held_raw)
            self._through, self._base_bytes, self._runs, self._slot = through, len(raw), [], slot
            return
        _log.warning("%s: other workers' folds kept overtaking this one; not folded (what it holds stays stored)",
                     record_place(store, key))

    def extend(self, entries: Iterable[tuple[str, str]]) -> None:
        """Learn ``(value, kind)`` pairs (a copy of another memory's values)."""
        for value, kind in entries:
            self.learn(value, kind)


@dataclass(frozen=True, slots=True)
class _Run:
    """What follows a memory's base in its store: a record (level 0) or a merged run, and the values it holds."""

    key: str
    start: int  # the number of its first record
    level: int
    size: int  # its bytes in the store
    secrets: dict[str, str]


def _losses(store: BlobStore | None) -> int:
    """The store's count of possible losses (0 for none, or a store without the method)."""
    losses = getattr(store, "losses", None)
    return int(losses()) if callable(losses) else 0


def memory_saved_at(store: BlobStore, key: str) -> float | None:
    """When the record stored under ``key`` (a memory's base or one appended) was saved, or None when not known."""
    try:
        record = stored_record(store, key)
    except CorruptRecord:
        return None  # (its age is unknown: kept)
    return record.saved_at if record is not None else None
