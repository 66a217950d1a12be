"""A session's secret memory: every value redaction took out of the session's text, remembered for the session.

A summarizer lists a token without the ``password=`` that made it recognisable, a masked output's digest says "it
mentioned: X", an agent repeats a key in prose: without its context a value matches no rule. So every value a
rule finds is remembered, and later occurrences of it are redacted wherever they stand. What is remembered for a
value: the value itself when it is specific enough (:func:`rememberable`), its JSON-escaped and unescaped forms,
and its long runs of letters and digits that switch between the two (key material reformatted, a PEM body's lines).

The memory of a session lives in the session's blob store beside its tool outputs (under
``session-secrets.<hash of the session id>``), so a restarted process or another fleet worker with the same store
redacts what the session saw before. The store holds the values in clear, as it already holds the whole tool
outputs they came from. A save merges with what is stored: two workers that learn at once both keep theirs, except
in the instant between one's read and its write (the next save of the other puts its values back).
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
from typing import TYPE_CHECKING, Any

from .._memo import TextMemo, text_key

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
# Each learn copies the table (readers never see it change): filling 16,384 costs ~1.5 s of a session's CPU.
MAX_LEARNED = 16_384
# A secret found inside JSON text (tool-call arguments) still has its escapes: `\nMIIE...` must teach `MIIE...`.
_JSON_ESCAPE_RE = re.compile(r"\\(?:[nrtbf/\"\\]|u[0-9a-fA-F]{4})")
_MARKER_RE = re.compile(r"\[REDACTED:[^\]\n]*\]")
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
_FORMAT = 1


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
    return [json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value, ensure_ascii=True)[1:-1],
            urllib.parse.quote(value, safe="", errors="surrogatepass"),
            urllib.parse.quote_plus(value, safe="", errors="surrogatepass"),
            html.escape(value, quote=False), html.escape(value, quote=True),
            encoded, encoded.replace("+", "-").replace("/", "_")]


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
        self._key = memory_key(session_id) if session_id is not None else None
        self._loaded = store is None
        self._unsaved = False
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
            self._unsaved = self._store is not None
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
            if self._loaded:
                return
            self._loaded = True  # (first: learning the stored values must not load again)
            stored = self._read()
            for value, kind in stored.items():
                self.learn(value, kind)
            self._unsaved = False

    @classmethod
    def of_store(cls, store: BlobStore) -> SecretMemory:
        """A memory (kept in this process) of every secret any session of ``store`` remembered there.

        For reading a store's outputs outside any session (``contextfold cache read``): each output may hold what
        one of the sessions that saw it learned.
        """
        memory = cls()
        for info in store.entries():
            if info.key.startswith(_KEY_PREFIX):
                memory.learn_all(_stored_values(store, info.key))
        return memory

    def _read(self) -> dict[str, str]:
        """The values the store holds for this session ({} when none, or when the stored form is unreadable)."""
        assert self._store is not None and self._key is not None
        return _stored_values(self._store, self._key)

    def save(self) -> bool:
        """Write what was learned since the last save to the store, merged with what it holds; True when written."""
        if self._store is None:
            return False
        losses = _losses(self._store)
        if not self._unsaved and (losses == self._losses_at_save or not self._values):
            return False
        with self._lock:
            self._losses_at_save = losses  # (a store that forgot gets all of it again: merged below)
            merged = {**self._read(), **self._values}
            document = {"format": _FORMAT, "saved_at": time.time(), "secrets": [[v, k] for v, k in merged.items()]}
            assert self._key is not None
            self._store.put(self._key, json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            self._unsaved = False
            # What another worker stored meanwhile is known here from now on too.
            for value, kind in merged.items():
                if value not in self._values:
                    self.learn(value, kind)
            self._unsaved = False
            return True

    def extend(self, entries: Iterable[tuple[str, str]]) -> None:
        """Learn ``(value, kind)`` pairs (a copy of another memory's values)."""
        for value, kind in entries:
            self.learn(value, kind)


def _losses(store: BlobStore | None) -> int:
    """The store's count of possible losses (0 for none, or a store without the method)."""
    losses = getattr(store, "losses", None)
    return int(losses()) if callable(losses) else 0


def memory_saved_at(store: BlobStore, key: str) -> float | None:
    """When the memory stored under ``key`` was last saved (seconds since the epoch), or None when not known."""
    document = _document(store, key)
    saved = document.get("saved_at") if isinstance(document, dict) else None
    return float(saved) if isinstance(saved, int | float) and not isinstance(saved, bool) else None


def _document(store: BlobStore, key: str) -> Any:
    from ..errors import RefNotFound

    try:
        raw = store.get(key)
    except RefNotFound:
        return None
    try:
        return json.loads(raw.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError):
        return None


def _stored_values(store: BlobStore, key: str) -> dict[str, str]:
    """The values a stored memory holds ({} when none, or when the stored form is unreadable)."""
    document = _document(store, key)
    entries = document.get("secrets") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        return {}
    return {e[0]: e[1] for e in entries
            if isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], str)}
