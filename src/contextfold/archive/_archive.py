"""The archive: what left the view is kept, so that a session's full history can always be rebuilt.

Before each compaction the manager archives the whole view as it stood (``transcript-pre-compact-NNN.jsonl``),
then the summary that replaced part of it (``summary-NNN.json``); events are appended to ``events.jsonl``.
:meth:`Archive.restore_history` merges the archived transcripts with the current view into the original history.

Everything is redacted before it is written (see :mod:`contextfold.redact`) unless the archive is built with
``redactor=None``, which the configuration allows only with a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from ..cache.refs import ref_id_for
from ..errors import CorruptRecord, InvalidHistory, RefNotFound, StoreError
from ..messages import Message, TextPart, ToolCall, freeze
from ..redact import Redactor
from ..serialize import (
    encode_message_chunks,
    encode_message_pieces,
    encode_messages,
    json_text,
    loads_messages,
    message_from_line,
    part_from_dict,
    part_to_dict,
)

__all__ = [
    "BOOKKEEPING_META",
    "DEFAULT_KEEP_META",
    "EVENTS_NAME",
    "MAX_ARCHIVE_KEY_CHARS",
    "PARTS_META",
    "SYNTHETIC_KINDS",
    "Archive",
    "ArchiveStore",
    "MemoryArchiveStore",
    "archive_key",
    "event_line",
    "merge_histories",
    "parts_skeleton",
    "session_from_key",
    "summary_name",
    "transcript_name",
    "validate_session_id",
    "with_layout",
]

EVENTS_NAME = "events.jsonl"
_TRANSCRIPT_RE = re.compile(r"^transcript-pre-compact-(\d{3,})\.jsonl$")
# Session ids become directory names and object keys: a conservative alphabet keeps them safe on every backend
# (no path traversal, no URL escaping), and 200 characters fits any filesystem's name limit. Ids outside it (e-mail
# addresses, "org:42", any Unicode) are stored under a reversible encoding that starts with "_" (see archive_key),
# which no plain id does, so the two can never name the same folder.
_PLAIN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,199}$")
_SESSION_ID_RE = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._\-]{0,199}|_[A-Za-z0-9._\-]{1,199})$")
_ENCODED_PREFIX = "_"
# Characters an encoded id keeps as they are; every other byte of its UTF-8 form becomes "_" and two hex digits.
_KEPT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")
_ESCAPE_RE = re.compile(r"_([0-9a-f]{2})")
MAX_ARCHIVE_KEY_CHARS = 200
# Kinds the manager creates rather than receives: summaries, retained facts, blocks of kept user messages,
# placeholders, synthetic outputs for interrupted calls and the notes to the model (compaction receipts, the budget
# line) are not part of the original history.
SYNTHETIC_KINDS = frozenset({"summary", "retain", "user_block", "placeholder", "aborted_output", "receipt",
                             "context_status"})
# Kinds of a message whose content is a view of an original kept in the tool output cache under meta["ref"].
_VIEW_KINDS = frozenset({"masked", "truncated"})
# meta keys a caller may have set on its own messages; everything else in meta is contextfold's bookkeeping.
DEFAULT_KEEP_META = ("protected", "label")
# meta keys the manager, the cache and masking add to an original message: its stable id, what kind of view it
# became, the ref of its full text and the size and part layout of that text, and the mark of an answered output
# shown wider than its write-time view (manager._answered_view.WIDENED_META; archived when the view is, since a
# wider output may now stay). keep_meta=None drops only these.
BOOKKEEPING_META = frozenset({"id", "kind", "ref", "original_bytes", "content_parts", "widened"})
# meta key under which a view of a multi-part tool output keeps the layout of its parts (see parts_skeleton):
# the cache stores only the joined text, so without it a restore would return one string instead of the parts.
PARTS_META = "content_parts"
# The arguments a tool call is left with when masking clears its inputs (masking._clear_inputs).
_TRIMMED_KEYS = frozenset({"trimmed", "ref"})
# Two writers racing for the same transcript number retry with the next one; more than this means a bug.
_MAX_NUMBER_RETRIES = 16


@runtime_checkable
class ArchiveStore(Protocol):
    """Named files per session. Writes replace whole files atomically; ``append`` adds to one.

    A store may also offer ``write_chunks(session_id, name, chunks, *, exclusive=False) -> int``: :meth:`write` of
    the pieces joined, taking them as they come (returns the size); the archive streams transcripts to it.

    Example:
        >>> from contextfold.stores.archive_fs import FilesystemArchiveStore
        >>> import tempfile
        >>> store = FilesystemArchiveStore(tempfile.mkdtemp())
        >>> store.write("s1", "summary-001.json", b"{}")
        >>> store.read("s1", "summary-001.json")
        b'{}'
    """

    def write(self, session_id: str, name: str, data: bytes, *, exclusive: bool = False) -> None:
        """Store ``data`` as ``name``: readers see the old or the new content, never a part.

        With ``exclusive``, raise ``FileExistsError`` instead of replacing an existing file.
        """
        ...

    def read(self, session_id: str, name: str) -> bytes | None:
        """The content of ``name``, or None when the session has no such file."""
        ...

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Add ``data`` at the end of ``name`` (created when missing)."""
        ...

    def names(self, session_id: str) -> list[str]:
        """The file names of a session, sorted (empty for an unknown session)."""
        ...

    def sessions(self) -> list[str]:
        """Every session id with at least one file, sorted."""
        ...

    def close(self) -> None:
        """Release connections (a no-op for most stores)."""
        ...


class _Pieces:
    """A file written in pieces, kept as its pieces (issue 22).

    The archive hands the in-memory store a transcript as :func:`~contextfold.serialize.encode_message_pieces`
    makes it: the copies of a message in a repeated history share one bytes object for the head of their lines
    (everything before the id), so a 100,000-message transcript of the shared SWE-agent sessions repeated takes
    ~20 MB instead of ~255 MB. The bytes read back are the bytes written, whatever the pieces.
    """

    __slots__ = ("pieces", "size")

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.size = 0

    def add(self, piece: bytes) -> None:
        self.pieces.append(piece)
        self.size += len(piece)

    def __bytes__(self) -> bytes:
        return b"".join(self.pieces)


class MemoryArchiveStore:
    """An :class:`ArchiveStore` in a dict, for tests and throwaway sessions (thread-safe)."""

    def __init__(self) -> None:
        # bytearrays: an append extends in place (amortized O(appended bytes)); rebuilding a bytes object per append
        # copied the whole events file under the GIL each time, stalling the agent's thread as the file grew.
        # A file written in pieces (a transcript) is kept as its pieces (_Pieces), until appended to.
        self._files: dict[tuple[str, str], bytearray | _Pieces] = {}
        self._lock = threading.Lock()

    def write(self, session_id: str, name: str, data: bytes, *, exclusive: bool = False) -> None:
        """Store ``data`` (``exclusive``: FileExistsError when present)."""
        key = (validate_session_id(session_id), name)
        with self._lock:
            if exclusive and key in self._files:
                raise FileExistsError(f"{session_id}/{name}")
            self._files[key] = bytearray(data)

    def write_chunks(self, session_id: str, name: str, chunks: Iterable[bytes], *, exclusive: bool = False) -> int:
        """Store the pieces of ``chunks`` as ``name`` (as :meth:`write` their join would); returns the size.

        The pieces are kept as they come (see :class:`_Pieces`): no whole copy of the file is made, and a piece
        given many times (the shared head of copies' lines) is held once.
        """
        key = (validate_session_id(session_id), name)
        with self._lock:
            if exclusive and key in self._files:
                raise FileExistsError(f"{session_id}/{name}")
        pieces = _Pieces()
        # (a bytes object is kept as it is: one piece shared by many copies' lines stays one object; pieces that are
        # all bytes, as encode_message_pieces gives, are kept after one C loop over their types: 200,000 of them)
        given = list(chunks)  # (a copy: the caller's list is not the store's)
        pieces.pieces = given if set(map(type, given)) <= {bytes} else \
            [chunk if type(chunk) is bytes else bytes(chunk) for chunk in given]
        pieces.size = sum(map(len, pieces.pieces))
        with self._lock:
            if exclusive and key in self._files:
                raise FileExistsError(f"{session_id}/{name}")
            self._files[key] = pieces
        return pieces.size

    def read(self, session_id: str, name: str) -> bytes | None:
        """The stored bytes, or None."""
        with self._lock:
            found = self._files.get((validate_session_id(session_id), name))
            return None if found is None else bytes(found)

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Extend (or create) ``name``."""
        key = (validate_session_id(session_id), name)
        with self._lock:
            found = self._files.get(key)
            if not isinstance(found, bytearray):  # (missing, or written in pieces: one buffer from now on)
                self._files[key] = found = bytearray(b"" if found is None else bytes(found))
            found.extend(data)

    def names(self, session_id: str) -> list[str]:
        """The session's names, sorted."""
        validate_session_id(session_id)
        with self._lock:
            return sorted(name for sid, name in self._files if sid == session_id)

    def sessions(self) -> list[str]:
        """Every session with a file."""
        with self._lock:
            return sorted({sid for sid, _ in self._files})

    def close(self) -> None:
        """Nothing to release."""


def event_line(event: Mapping[str, Any]) -> str:
    """One event as a line of ``events.jsonl`` (compact JSON; no redaction here)."""
    return json_text(dict(event), separators=(",", ":"), default=str)


def validate_session_id(session_id: str) -> str:
    """``session_id`` itself when a store may use it as a name, or a ValueError saying what is wrong with it.

    The :class:`Archive` passes :func:`archive_key` of a session's id, which always passes; a store called directly
    refuses anything that could leave its folder or need escaping.
    """
    if not isinstance(session_id, str) or not _SESSION_ID_RE.fullmatch(session_id):
        raise ValueError(
            f"session_id {session_id!r}: use 1-200 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return session_id


def archive_key(session_id: str) -> str:
    """The name of ``session_id`` in an archive store: the id itself when it is plain, else a reversible encoding.

    Plain: 1-200 letters, digits, ``.``, ``_`` or ``-``, starting with a letter or digit. Anything else
    (``user@example.com``, ``org:42``, ``../x``, a NUL, a trailing newline, full-width letters) becomes ``_`` followed
    by the id with every byte outside ``[A-Za-z0-9.-]`` of its UTF-8 form written ``_XX`` (``_user_40example.com``).
    :func:`session_from_key` gives the id back.

    Raises:
        ValueError: not a non-empty string, not valid Unicode, or encoded over :data:`MAX_ARCHIVE_KEY_CHARS` characters.
    """
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r:.80}")
    if _PLAIN_ID_RE.fullmatch(session_id):
        return session_id
    try:
        raw = session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"session_id {session_id!r:.80} is not valid Unicode text (a lone surrogate)") from None
    key = _ENCODED_PREFIX + "".join(chr(b) if chr(b) in _KEPT_CHARS else f"_{b:02x}" for b in raw)
    if len(key) > MAX_ARCHIVE_KEY_CHARS:
        raise ValueError(f"session_id {session_id!r:.80} takes {len(key)} characters once encoded for the archive "
                         f"(characters other than letters, digits, '.' and '-' take 3 each, more outside ASCII); "
                         f"at most {MAX_ARCHIVE_KEY_CHARS}")
    return key


def session_from_key(key: str) -> str:
    """The session id an archive store's name stands for (the inverse of :func:`archive_key`)."""
    if not key.startswith(_ENCODED_PREFIX):
        return key
    body = key[len(_ENCODED_PREFIX):]
    try:
        raw = _ESCAPE_RE.sub(lambda m: chr(int(m.group(1), 16)), body).encode("latin-1")
        return raw.decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return key  # not one of ours: shown as it is


def transcript_name(n: int) -> str:
    """The file name of the ``n``-th pre-compaction transcript (1-based)."""
    return f"transcript-pre-compact-{n:03d}.jsonl"


def summary_name(n: int) -> str:
    """The file name of the summary made by the ``n``-th compaction."""
    return f"summary-{n:03d}.json"


def _identity(m: Message, position: int) -> tuple[str, ...]:
    """What identifies one original message across views: its stable id, else its position and fingerprint."""
    mid = m.meta.get("id")
    if mid is not None:
        return ("id", str(mid))
    # Without ids a message is only recognised where it sits unchanged at the same place; best effort.
    return ("pos", str(position), m.fingerprint())


def _is_view(m: Message) -> bool:
    return (m.kind in _VIEW_KINDS and m.meta.get("ref") is not None) or any(_trimmed_ref(c) for c in m.tool_calls)


def _trimmed_ref(call: ToolCall) -> str | None:
    """The ref of a tool call's arguments that masking cleared (``{"trimmed": true, "ref": ...}``), else None."""
    if '"trimmed"' not in call.arguments:
        return None
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return None
    if isinstance(value, dict) and set(value) == _TRIMMED_KEYS and value["trimmed"] is True:
        ref = value["ref"]
        return ref if isinstance(ref, str) else None
    return None


def parts_skeleton(m: Message) -> tuple[dict[str, Any], ...] | None:
    """The layout of a text-only multi-part content (each part without its text, plus its length), else None.

    Whoever replaces such a content by a view of its joined text keeps this under ``meta[PARTS_META]``, so that
    :meth:`Archive.restore_history` can give back the parts, not just their text.
    """
    if isinstance(m.content, str):
        return None
    texts = [p for p in m.content if isinstance(p, TextPart)]
    if len(texts) != len(m.content):
        return None
    return tuple({**part_to_dict(replace(p, text="")), "chars": len(p.text)} for p in texts)


def _rebuild_parts(text: str, skeleton: Any) -> str | tuple[Any, ...]:
    """``text`` split back into the parts ``skeleton`` describes (joined by newlines); ``text`` when it does not fit."""
    if not isinstance(skeleton, Sequence) or isinstance(skeleton, str) or not skeleton:
        return text
    try:
        lengths = [int(s["chars"]) for s in skeleton]
    except (KeyError, TypeError, ValueError):
        return text
    if sum(lengths) + len(lengths) - 1 != len(text):
        return text
    parts: list[Any] = []
    pos = 0
    for shape, n in zip(skeleton, lengths, strict=True):
        fields = {k: v for k, v in shape.items() if k != "chars"}
        parts.append(part_from_dict({**fields, "text": text[pos : pos + n]}))
        pos += n + 1
    return tuple(parts)


def merge_histories(views: Iterable[Sequence[Message]]) -> list[Message]:
    """The original messages of successive views (archived transcripts, then the current view), each once.

    Synthetic messages (:data:`SYNTHETIC_KINDS`) are dropped. Messages are matched by ``meta["id"]``. Views only
    grow at the end between compactions and every compaction archives the whole view first, so a message first
    seen in a later view was added after everything in the earlier ones: it goes at the end, in its view's order.
    For each message the most complete version wins: an original over a masked or truncated view of it.

    A view whose first message has an id of a manager not seen before comes from a new manager of the same session
    (the manager's ids carry a per-manager nonce); when it starts by repeating the history so far message for
    message (the same recording compacted again, an application that re-adds its history to a fresh manager), those
    messages are the ones already merged, not new ones: they are matched by position and content, and only what
    follows is added. A new id of a manager already seen (or one the caller gave) is a new message, even when it
    repeats the first one: a compaction that summarized every original leaves the next view starting with one.
    """
    order: list[tuple[str, ...]] = []
    best: dict[tuple[str, ...], Message] = {}
    alias: dict[tuple[str, ...], tuple[str, ...]] = {}
    managers: set[str] = set()  # the id namespaces (manager prefixes) of the messages merged so far
    for view in views:
        originals = [m for m in view if m.kind not in SYNTHETIC_KINDS]
        keys = [_identity(m, position) for position, m in enumerate(originals)]
        if order and keys and keys[0] not in best and keys[0] not in alias and _from_new_manager(keys[0], managers):
            for position, (key, m) in enumerate(zip(keys, originals, strict=True)):
                if position >= len(order) or key in best or not _same_original(best[order[position]], m):
                    break
                alias[key] = order[position]
        for key, m in zip(keys, originals, strict=True):
            key = alias.get(key, key)
            known = best.get(key)
            if known is None:
                order.append(key)
                best[key] = m
                if key[0] == "id" and (namespace := _id_namespace(key[1])) is not None:
                    managers.add(namespace)
            elif _is_view(known) and not _is_view(m):
                best[key] = m
    return [best[k] for k in order]


def _id_namespace(message_id: str) -> str | None:
    """The manager prefix of an id the manager gave (``<prefix>:<n>``); None for an id of another form."""
    prefix, _, number = message_id.rpartition(":")
    return prefix if prefix and number.isdigit() else None


def _from_new_manager(key: tuple[str, ...], managers: set[str]) -> bool:
    """Whether a view's first message, not merged before, may come from a manager whose views were not merged yet.

    An id without the manager's ``<prefix>:<n>`` form is the caller's, stable across managers (a re-added history
    repeats it); a message without an id is told only by position (best effort, as before).
    """
    if key[0] != "id":
        return True
    namespace = _id_namespace(key[1])
    return namespace is not None and namespace not in managers


def _same_original(a: Message, b: Message) -> bool:
    """Whether ``a`` and ``b`` are the same original message, either possibly a masked or truncated view of it.

    Refs are content-addressed: a view's ref names the text it stands for, so a view made by one manager matches
    the original another manager archived whole (a resumed session masks what its predecessor kept verbatim).
    """
    if a.fingerprint() == b.fingerprint():
        return True
    return a.role == b.role and a.tool_call_id == b.tool_call_id and _original_key(a) == _original_key(b)


def _original_key(m: Message) -> tuple[str | None, tuple[tuple[str, str, str], ...]]:
    """The ref of the text ``m`` stands for and of each tool call's arguments, the same for a view and its original."""
    ref = m.meta.get("ref")
    if not (m.kind in _VIEW_KINDS and isinstance(ref, str)):
        text = m.content if isinstance(m.content, str) else \
            m.text if all(isinstance(p, TextPart) for p in m.content) else None
        ref = None if text is None else _ref_of(text)
    calls = tuple((c.id, c.name, _trimmed_ref(c) or _ref_of(c.arguments)) for c in m.tool_calls)
    return ref, calls


def _ref_of(text: str) -> str:
    # As the cache stores a text (surrogatepass: a lone surrogate keeps its bytes).
    return ref_id_for(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True, eq=False)
class _UnconfirmedWrite:
    """A transcript write that raised: its number and the digest of its bytes (what landed, if it did)."""

    number: int
    digest: bytes


# Unconfirmed writes remembered per session (each a failed compaction's; a session retries its latest), and the
# sessions remembered at most (the oldest forgotten first: a forgotten one is archived under the next number, as
# before the replacement existed).
_MAX_UNCONFIRMED = 4
_MAX_UNCONFIRMED_SESSIONS = 256


def _transcript_digest(lines: Sequence[Message]) -> bytes:
    """The SHA-256 of the transcript ``lines`` make (the same bytes whichever way a store is handed them)."""
    digest = hashlib.sha256()
    for chunk in encode_message_chunks(lines):
        digest.update(chunk)
    return digest.digest()


class Archive:
    """Writes and reads a session's archive on any :class:`ArchiveStore`.

    Args:
        store: where the files go.
        redactor: applied to every message, summary and event before it is written (the built-in patterns when
            None). ``Redactor(enabled=False)`` writes secrets verbatim; the caller should then emit a warning event.
    """

    def __init__(self, store: ArchiveStore, *, redactor: Redactor | None = None) -> None:
        self.store = store
        self.redactor = redactor if redactor is not None else Redactor()
        # Transcript writes that raised, by session key: the store may have stored them and lost only its answer.
        self._unconfirmed: dict[str, list[_UnconfirmedWrite]] = {}
        self._unconfirmed_lock = threading.Lock()

    # -- writing --------------------------------------------------------------------------------------------------
    def archive_transcript(self, session_id: str, messages: Sequence[Message], *, redacted: bool = False) -> int:
        """Archive the view about to be compacted; returns its number ``n`` (1, 2, …) for :meth:`archive_summary`.

        ``redacted=True``: the caller already redacted ``messages`` with this archive's redactor (the manager does,
        skipping the messages it redacted for an earlier transcript).
        """
        key = archive_key(session_id)
        lines = messages if redacted else self.redactor.redact_messages(messages)
        lines = self.redactor.redact_provider_state(lines)  # (a signed thinking block's text too: it is stored)
        if self._unconfirmed.get(key):
            retried = self._rewrite_landed(key, lines)
            if retried is not None:
                return retried
        # A store that takes the transcript in pieces gets it as it is encoded (issue 22: ~260 MB at 100,000
        # messages, held twice to join it, and once more in a store's copy).
        streams = getattr(self.store, "write_chunks", None)
        data = b"" if callable(streams) else encode_messages(lines)
        n = self._next_number(session_id)
        for _ in range(_MAX_NUMBER_RETRIES):
            try:
                if callable(streams):
                    # (the in-memory store keeps the pieces as they are: a copy's line shares its head with the
                    # other copies'; a file is better written in pieces of a megabyte)
                    pieces = encode_message_pieces(lines) if isinstance(self.store, MemoryArchiveStore) else \
                        encode_message_chunks(lines)
                    size = int(streams(key, transcript_name(n), pieces, exclusive=True))
                else:
                    self.store.write(key, transcript_name(n), data, exclusive=True)
                    size = len(data)
                _audit_write(self.store, key, transcript_name(n), len(messages), size)
                self._forget_session_unconfirmed(key)  # (a number after theirs: none is the newest any more)
                return n
            except FileExistsError:
                n += 1
            except BaseException:
                self._note_unconfirmed(key, n, lines)
                raise
        raise StoreError(f"session {session_id!r}: could not claim a transcript number after {n}")

    def _note_unconfirmed(self, key: str, n: int, lines: Sequence[Message]) -> None:
        """Remember a transcript write that raised: the store may hold it (only its answer lost)."""
        write = _UnconfirmedWrite(n, _transcript_digest(lines))
        with self._unconfirmed_lock:
            pending = self._unconfirmed.pop(key, [])  # (re-inserted: the dict's order is the sessions' recency)
            pending.append(write)
            del pending[:-_MAX_UNCONFIRMED]
            self._unconfirmed[key] = pending
            while len(self._unconfirmed) > _MAX_UNCONFIRMED_SESSIONS:
                del self._unconfirmed[next(iter(self._unconfirmed))]

    def _rewrite_landed(self, key: str, lines: Sequence[Message]) -> int | None:
        """The number of an earlier write of these records that landed, now holding ``lines``; None when none did.

        A transcript whose write raised after the store kept it (a lost answer) is this archive's own: the retry
        (the same view, or the same with the turns added since) replaces it instead of claiming the next number.
        Archived again under a new number, every message of it was in the archive twice and the summary filed under
        a compaction that never took place twice. Only a file holding exactly the bytes that write carried is taken
        (another writer's transcript under that number is not), only while it is still the session's newest (a
        later transcript archived after it is not overwritten by an older one's retry), and only by records whose
        lines hold every stored line as many times as it is stored (nothing archived is lost by the replacement,
        not a repeated message nor a message's meta).
        """
        with self._unconfirmed_lock:
            pending = self._unconfirmed.pop(key, [])  # (whatever is decided, none of these is tried again)
        if not pending:
            return None
        numbers = self._transcript_numbers_of_key(key)
        newest = numbers[-1] if numbers else None
        write = next((w for w in reversed(pending) if w.number == newest), None)
        if write is None:
            return None  # none landed, or one did and a later transcript came after it: the next number as usual
        name = transcript_name(write.number)
        stored = self.store.read(key, name)
        if stored is None or hashlib.sha256(stored).digest() != write.digest:
            return None  # another writer's is there: the next number is claimed as usual
        data = encode_messages(lines)
        if Counter(stored.split(b"\n")) - Counter(data.split(b"\n")):
            return None  # the retry leaves out a stored line (or changed it): archived under the next number
        if data != stored:
            try:
                self.store.write(key, name, data)  # (ours: replaced, readers see the old or the new whole)
            except BaseException:
                self._note_unconfirmed(key, write.number, lines)
                raise
        _audit_write(self.store, key, name, len(lines), len(data))
        return write.number

    def _forget_session_unconfirmed(self, key: str) -> None:
        if key in self._unconfirmed:
            with self._unconfirmed_lock:
                self._unconfirmed.pop(key, None)

    def archive_summary(self, session_id: str, n: int, summary: Mapping[str, Any]) -> None:
        """Archive the summary made by compaction ``n`` (its text, retained facts, figures: any JSON object)."""
        key = archive_key(session_id)
        if n < 1:
            raise ValueError(f"n: must be >= 1, got {n}")
        body = json_text(self.redactor.redact_obj(dict(summary)), indent=2, default=str)
        data = (body + "\n").encode()
        self.store.write(key, summary_name(n), data)
        _audit_write(self.store, key, summary_name(n), 1, len(data))

    def append_events(self, session_id: str, events: Iterable[Mapping[str, Any]]) -> None:
        """Append events (JSON objects) to the session's ``events.jsonl``."""
        self.append_event_lines(session_id, [event_line(self.redactor.redact_obj(dict(e))) for e in events])

    def append_event_lines(self, session_id: str, lines: Sequence[str]) -> None:
        """Append events already redacted and serialized with :func:`event_line` (a telemetry processor's batch)."""
        key = archive_key(session_id)
        if lines:
            data = ("\n".join(lines) + "\n").encode()
            self.store.append(key, EVENTS_NAME, data)
            _audit_write(self.store, key, EVENTS_NAME, len(lines), len(data))

    def _next_number(self, session_id: str) -> int:
        numbers = self.transcript_numbers(session_id)
        return numbers[-1] + 1 if numbers else 1

    # -- reading --------------------------------------------------------------------------------------------------
    def transcript_numbers(self, session_id: str) -> list[int]:
        """The numbers of the session's archived transcripts, ascending."""
        return self._transcript_numbers_of_key(archive_key(session_id))

    def _transcript_numbers_of_key(self, key: str) -> list[int]:
        """:meth:`transcript_numbers` of the session stored under ``key`` (its :func:`archive_key`)."""
        found = (_TRANSCRIPT_RE.fullmatch(name) for name in self.store.names(key))
        return sorted(int(m.group(1)) for m in found if m)

    def transcript(self, session_id: str, n: int, *,
                   on_bad_line: Callable[[str], None] | None = None) -> list[Message]:
        """The ``n``-th archived transcript.

        Args:
            session_id: the session.
            n: the transcript's number.
            on_bad_line: when given, a line that is not a message (torn by a crash, binary, tampered with) is
                skipped and described to it, and the rest is read; otherwise such a line raises ``StoreError``.
        """
        key = archive_key(session_id)
        name = transcript_name(n)
        source = f"{key}/{name}"
        try:
            data = self.store.read(key, name)
        except CorruptRecord as exc:  # (a FIFO or link planted under its name): told, as a bad line is
            if on_bad_line is None:
                raise
            on_bad_line(f"{source} skipped: {exc}")
            return []
        if data is None:
            raise KeyError(f"session {session_id!r} has no {name}")
        if on_bad_line is not None:
            return _tolerant_lines(data, source, on_bad_line)
        try:
            return loads_messages(data.decode("utf-8"), source=source)
        except (UnicodeDecodeError, InvalidHistory) as exc:
            raise StoreError(f"archive {source} is corrupt: {exc}") from None

    def transcripts(self, session_id: str, *,
                    on_bad_line: Callable[[str], None] | None = None) -> list[tuple[int, list[Message]]]:
        """Every archived transcript with its number, oldest first (``on_bad_line``: see :meth:`transcript`)."""
        return [(n, self.transcript(session_id, n, on_bad_line=on_bad_line))
                for n in self.transcript_numbers(session_id)]

    def summary(self, session_id: str, n: int) -> dict[str, Any] | None:
        """The summary archived by compaction ``n``, or None."""
        key = archive_key(session_id)
        data = self.store.read(key, summary_name(n))
        if data is None:
            return None
        value = json.loads(data)
        return value if isinstance(value, dict) else {"value": value}

    def events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's archived events, in order; a line that is no JSON object (a torn one) is skipped."""
        key = archive_key(session_id)
        data = self.store.read(key, EVENTS_NAME)
        if not data:
            return []
        out: list[dict[str, Any]] = []
        for line in data.decode("utf-8", errors="replace").split("\n"):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):  # torn, or not ours: past the reader's depth or int's digit cap
                continue
            if isinstance(event, dict):
                out.append(event)
        return out

    def sessions(self) -> list[str]:
        """Every archived session id (as the sessions gave it: see :func:`archive_key`)."""
        return sorted(session_from_key(key) for key in self.store.sessions())

    # -- restoring ------------------------------------------------------------------------------------------------
    def restore_history(
        self,
        session_id: str,
        current_view: Sequence[Message] = (),
        *,
        resolve_ref: Callable[[str], str] | None = None,
        keep_meta: Iterable[str] | None = DEFAULT_KEEP_META,
        on_bad_line: Callable[[str], None] | None = None,
    ) -> list[Message]:
        """The session's full original history: archived transcripts merged with ``current_view``.

        Args:
            session_id: the session.
            current_view: the manager's view now (what has not been archived yet is only there).
            resolve_ref: ref id -> full text (``ToolOutputCache.get``). When given, masked and truncated tool
                outputs (and tool-call arguments cleared by masking) get their full text back and contextfold's
                ``meta`` is dropped (keys in ``keep_meta`` stay), so that the result equals the messages as the
                agent added them. An output whose ref is no longer cached keeps its view and its meta, so the gap
                stays visible.
            keep_meta: meta keys that belong to the caller, kept when ``resolve_ref`` is given; None keeps every key
                but contextfold's own (:data:`BOOKKEEPING_META`), so importer and caller keys come back too.
            on_bad_line: when given, an archived line that is not a message is skipped and described to it (see
                :meth:`transcript`); otherwise it raises ``StoreError``.
        """
        views: list[Sequence[Message]] = [messages for _, messages in self.transcripts(session_id,
                                                                                       on_bad_line=on_bad_line)]
        views.append(current_view)
        merged = merge_histories(views)
        if resolve_ref is None:
            return merged
        keep = None if keep_meta is None else frozenset(keep_meta)
        return [_restore_original(m, resolve_ref, keep) for m in merged]


def _tolerant_lines(data: bytes, source: str, on_bad_line: Callable[[str], None]) -> list[Message]:
    """The messages of a JSON Lines transcript, each line on its own: a bad one is reported and skipped."""
    out: list[Message] = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            out.append(message_from_line(raw.decode("utf-8"), lineno, source=source))
        except UnicodeDecodeError:
            on_bad_line(f"{source} line {lineno}: not UTF-8 text")
        except InvalidHistory as exc:
            on_bad_line(exc.problem)
    return out


def _restore_calls(m: Message, resolve_ref: Callable[[str], str]) -> Message | None:
    """``m`` with cleared tool-call arguments resolved; None when one of their refs is gone."""
    calls: list[ToolCall] = []
    for call in m.tool_calls:
        ref = _trimmed_ref(call)
        if ref is not None:
            try:
                call = replace(call, arguments=resolve_ref(ref))
            except (RefNotFound, KeyError):
                return None
        calls.append(call)
    return replace(m, tool_calls=tuple(calls)) if calls else m


def _restore_original(m: Message, resolve_ref: Callable[[str], str], keep: frozenset[str] | None) -> Message:
    if _is_view(m):
        restored = _restore_calls(m, resolve_ref)
        if restored is None:
            return m
        if m.kind in _VIEW_KINDS and m.meta.get("ref") is not None:
            try:
                text = resolve_ref(str(m.meta["ref"]))
            except (RefNotFound, KeyError):
                return m
            restored = restored.with_content(_rebuild_parts(text, m.meta.get(PARTS_META)))
        m = restored
    if keep is None:
        meta = freeze({k: v for k, v in m.meta.items() if k not in BOOKKEEPING_META})
    else:
        meta = freeze({k: v for k, v in m.meta.items() if k in keep})
    return m if meta == m.meta else replace(m, meta=meta)


def with_layout(original: Message, view: Message) -> Message:
    """``view`` remembering the part layout of ``original`` when it flattened a multi-part text into one string.

    The cache keeps only the joined text; the layout lets the archive's restore give back the parts themselves.
    """
    if view is original or isinstance(original.content, str) or PARTS_META in view.meta:
        return view
    skeleton = parts_skeleton(original)
    return view if skeleton is None else view.with_meta(**{PARTS_META: skeleton})


# Writes to an archive are exports too (004 §Risk 3): one line each on the audit logger the telemetry processor uses.
_audit = logging.getLogger("contextfold.audit")


def _audit_write(store: object, session_id: str, name: str, records: int, size: int) -> None:
    if _audit.isEnabledFor(logging.INFO):
        _audit.info("archive store=%s session=%s object=%s records=%d bytes=%d outcome=written",
                    type(store).__name__, session_id, name, records, size)
