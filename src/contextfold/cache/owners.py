"""Which sessions own a cached tool output, and store-wide retention by age and size.

Outputs are content-addressed, so two sessions that see the same output share one blob. Ownership is recorded as
one small marker blob per (output, session) beside it: ``<ref>.owner.<tag>``, where ``tag`` is 16 hex digits of
the session id's hash and the value is the time of last use (8 bytes, big-endian Unix seconds). Markers live in
the same :class:`~contextfold.cache.BlobStore`, so every backend (memory, SQLite, Redis, a third party's) gets
ownership without a new method, and a resumed session finds its outputs again.

A session's grep without a ref searches the outputs it owns; its GC removes only its own claims and deletes a
blob once nobody claims it; store-wide retention deletes outputs nobody has used for ``max_age_s`` and, over
``max_bytes``, evicts the least recently used, never one a session used within ``live_s``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ._line_index import index_owner
from .blobs import BlobStore

__all__ = ["OWNER_INFIX", "SESSION_USE_PREFIX", "Retention", "StoredOutput", "claim_item", "delete_output",
           "delete_use_as_read", "load_claims", "owner_key", "owner_tag", "parse_owner_key", "read_claim", "read_use",
           "survey", "use_key", "write_claim", "write_use"]

OWNER_INFIX = ".owner."
# 64 bits of the session id's hash: names the owner without putting a user-chosen string in a key.
_TAG_BYTES = 8
_TIME = struct.Struct(">q")
# The tag of a cache built without a session (the CLI, a library user); such a cache writes no claims.
SHARED_OWNER = "shared"
# The key of a session's last use (<prefix><tag>, the time as a claim holds it): what a session that cites no output
# notes as it is used, so that retention ages its secret memory by its use, not by the memory's last save (not a ref
# id, claim or index: survey lists it with the other keys).
SESSION_USE_PREFIX = "session-used."

# Defaults of the store-wide retention: two weeks unused, 1 GiB in all, and a day during which a session's outputs
# are live (never evicted for size). A session refreshes its claims whenever it reads or writes an output.
DEFAULT_MAX_AGE_S = 14 * 24 * 3600
DEFAULT_MAX_BYTES = 1024**3
DEFAULT_LIVE_S = 24 * 3600


@dataclass(frozen=True, slots=True)
class Retention:
    """How long and how much a store keeps.

    Attributes:
        max_age_s: Outputs no session has used for this long are deleted (None: no age limit).
        max_bytes: Past this many bytes, the least recently used outputs are evicted (None: no size limit).
        live_s: Outputs some session used within this long are never evicted for size.
        every_puts: A cache runs retention after this many new outputs (and when its manager opens and closes).
    """

    max_age_s: float | None = DEFAULT_MAX_AGE_S
    max_bytes: int | None = DEFAULT_MAX_BYTES
    live_s: float = DEFAULT_LIVE_S
    every_puts: int = 200


def owner_tag(session_id: str | None) -> str:
    """The marker tag of ``session_id`` (``shared`` without one)."""
    if session_id is None:
        return SHARED_OWNER
    return hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=_TAG_BYTES).hexdigest()


def owner_key(ref_id: str, tag: str) -> str:
    """The store key of ``tag``'s claim on ``ref_id``."""
    return f"{ref_id}{OWNER_INFIX}{tag}"


def parse_owner_key(key: str) -> tuple[str, str] | None:
    """``(ref_id, tag)`` of a claim key, or None for other keys."""
    ref_id, sep, tag = key.partition(OWNER_INFIX)
    return (ref_id, tag) if sep and tag else None


def write_claim(store: BlobStore, ref_id: str, tag: str, now: float) -> None:
    """Record that ``tag`` used ``ref_id`` at ``now``."""
    store.put(*claim_item(ref_id, tag, now))


def claim_item(ref_id: str, tag: str, now: float) -> tuple[str, bytes]:
    """The key and value :func:`write_claim` stores (for a caller writing it in one call with others)."""
    return owner_key(ref_id, tag), _TIME.pack(int(now))


def read_claim(store: BlobStore, ref_id: str, tag: str) -> float | None:
    """When ``tag`` last used ``ref_id``, or None when it holds no claim."""
    key = owner_key(ref_id, tag)
    if store.size(key) is None:
        return None
    try:
        return float(_TIME.unpack(store.read_range(key, 0, _TIME.size))[0])
    except (struct.error, KeyError, LookupError):
        return None


def use_key(tag: str) -> str:
    """The store key of ``tag``'s last use."""
    return f"{SESSION_USE_PREFIX}{tag}"


def write_use(store: BlobStore, tag: str, now: float) -> None:
    """Record that the session ``tag`` was used at ``now`` (its outputs' claims say so only for what it cites)."""
    store.put(use_key(tag), _TIME.pack(int(now)))


def delete_use_as_read(store: BlobStore, key: str, when: float) -> None:
    """Delete the use key ``key`` only while it holds ``when`` (as read): a session noting its use meanwhile keeps it.

    A plain delete, after a session back after the age noted its use, took the note, and its memory was aged by its
    last save again (s20f).
    """
    put_if = getattr(store, "put_if", None)  # (a third party's store may predate it)
    if callable(put_if):
        put_if(key, None, _TIME.pack(int(when)))
    else:
        store.delete(key)


def read_use(store: BlobStore, key: str) -> float | None:
    """The time a use key (:func:`use_key`) holds, or None when it is gone or holds no time."""
    try:
        return float(_TIME.unpack(store.get(key))[0])
    except (struct.error, KeyError, LookupError):
        return None


@dataclass(slots=True)
class StoredOutput:
    """One output as the store holds it: bytes (with its index), claims, and LRU order."""

    ref_id: str
    size: int = 0
    accessed: int = 0
    present: bool = False
    claims: dict[str, float] = field(default_factory=dict)  # tag -> last use (filled on demand)
    claim_keys: list[str] = field(default_factory=list)
    index_key: str | None = None


def survey(store: BlobStore, is_output: Callable[[str], bool],
           others: list[str] | None = None) -> tuple[dict[str, StoredOutput], list[str]]:
    """Every output in ``store`` with its index and claim keys, and the keys of orphans (index or claim alone).

    ``others``: filled with the keys that are none of these (a session's secret memory, a learned limit).
    """
    outputs: dict[str, StoredOutput] = {}
    for info in list(store.entries()):
        claim = parse_owner_key(info.key)
        owner = index_owner(info.key)
        if claim is not None:
            outputs.setdefault(claim[0], StoredOutput(claim[0])).claim_keys.append(info.key)
        elif owner is not None:
            entry = outputs.setdefault(owner, StoredOutput(owner))
            entry.index_key = info.key
            entry.size += info.size
        elif is_output(info.key):
            entry = outputs.setdefault(info.key, StoredOutput(info.key))
            entry.present = True
            entry.size += info.size
            entry.accessed = info.accessed
        elif others is not None:
            others.append(info.key)
    orphans: list[str] = []
    for entry in outputs.values():
        if not entry.present:
            orphans.extend(entry.claim_keys)
            if entry.index_key is not None:
                orphans.append(entry.index_key)
    return {r: e for r, e in outputs.items() if e.present}, orphans


def delete_output(store: BlobStore, entry: StoredOutput, *, unused: bool = False) -> bool:
    """Delete an output, its index and every claim on it (the output first: a crash leaves orphans, not holes).

    ``unused``: only when nobody used the output since it was listed (its access order is ``entry.accessed``, see
    :meth:`BlobStore.delete_unused`); False, and nothing deleted, when somebody did. Then a session finding the
    output gone after the delete writes it again, its index and claim with it: each claim goes only while it holds
    what was read (``entry.claims``), the index only while the output is gone. On s20f both went whatever they held,
    and the session's output was left with no claim (the next collection took it) and no line index.
    """
    delete_unused = getattr(store, "delete_unused", None) if unused else None  # (a third party's may predate it)
    if callable(delete_unused):
        if not delete_unused(entry.ref_id, entry.accessed):
            return False
    else:
        store.delete(entry.ref_id)
    if not unused:
        for key in (entry.index_key, *entry.claim_keys):
            if key is not None:
                store.delete(key)
        return True
    for key in entry.claim_keys:
        _delete_claim_as_read(store, entry, key)
    if entry.index_key is not None:
        _delete_index_of_absent(store, entry.ref_id, entry.index_key)
    return True


def _delete_claim_as_read(store: BlobStore, entry: StoredOutput, key: str) -> None:
    """Delete the claim ``key`` only while it holds the time read into ``entry`` (a claim unread: deleted)."""
    parsed = parse_owner_key(key)
    tag = parsed[1] if parsed is not None else None
    when = entry.claims.get(tag) if tag is not None else None
    put_if = getattr(store, "put_if", None)  # (a third party's store may predate it)
    if tag is None or when is None or not callable(put_if):
        store.delete(key)
        return
    put_if(key, None, claim_item(entry.ref_id, tag, when)[1])


def _delete_index_of_absent(store: BlobStore, ref_id: str, key: str) -> None:
    """Delete the line index ``key`` of ``ref_id`` while the output is gone; put back if it is written meanwhile.

    The index is the output's content's (the same bytes whoever writes it): one written again between the check and
    the delete is the one deleted, and put back (a session writes index and output in one call).
    """
    if store.exists(ref_id):
        return
    try:
        held = store.get(key)
    except (KeyError, LookupError):
        return
    store.delete(key)
    if store.exists(ref_id):
        store.put(key, held)


def load_claims(store: BlobStore, entries: Iterable[StoredOutput]) -> None:
    """Fill ``claims`` (tag -> last use) of ``entries`` from their claim keys."""
    for entry in entries:
        for key in entry.claim_keys:
            parsed = parse_owner_key(key)
            if parsed is None:
                continue
            when = read_claim(store, entry.ref_id, parsed[1])
            if when is not None:
                entry.claims[parsed[1]] = when
