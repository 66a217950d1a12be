"""How a session's secret memory is kept in its blob store: a base record and the records appended after it.

A save used to rewrite the whole memory (every value learned so far) under one key: a session that learns thousands
of secrets wrote quadratically many bytes (10,000 secrets, one save per 10: ~250 MB). Now a save writes only what
is new, as a record of its own under the next key (``<memory key>.<n>``). Records are merged by levels, so that a
load reads a bounded number of keys while each byte is written a bounded number of times: ``FAN_IN`` records make
a run of level 1 (``<memory key>.<first>.1``), ``FAN_IN`` runs of a level one of the next (up to ``MAX_LEVEL``),
and once what follows the base outweighs it everything is folded into a new base (``<memory key>`` or
``<memory key>.b``, in turn; each says through which record it holds, and the one holding more is read). A base
at least doubles at each fold: bases cost at most twice the memory in all, and each record's bytes are written
again once a level (a fold every 32 records rewrote the whole base: ~14x the memory for many small saves).
A run of level ``l`` holds ``FAN_IN ** l`` records, from a record whose distance to the base's is a multiple of
that: where one can start is known, and a load asks for it there.

Each record is a header line (``cf-secrets <format> <length> <crc32>``) and its JSON. A blob store's ``put`` is
atomic; a record cut short anyway (a store that is not, a copy of the file cut) is told by its length: the newest
record cut short, or a base cut short, is a save that never finished, left out (what was saved before it loads: the
other base and the records after it were not deleted yet); any other record that is not whole, or whose checksum or
JSON is wrong, is refused with a :class:`~contextfold.errors.CorruptRecord` naming the store and the key (a memory
that forgot what it held would redact nothing of it).

The store's operations on those keys are here too: reading a record, the one-step writes workers sharing a
memory rely on (``put_new``, ``put_if``: the protocol's read-then-write for a store without them), the passed-over
note raised and never lowered, and the sweeps of what a killed merge or fold left. :mod:`.memory` decides when to
append, merge, fold and read; this module says where each thing is and how it is written.
"""

from __future__ import annotations

import json
import logging
import re
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import CorruptRecord

if TYPE_CHECKING:
    from ..cache.blobs import BlobStore

__all__ = ["FAN_IN", "FORMAT", "LAYOUT", "MAX_LEVEL", "Record", "base_key", "decode_record", "encode_record", "key_at",
           "memory_groups", "note_passed", "over_cut_run", "passed", "passed_key", "put_if", "put_new", "record_place",
           "run_key", "run_records", "segment_key", "stored_bytes", "stored_record", "sweep_merged", "sweep_range",
           "tell_if_not_atomic"]

# The format of a record with a header (1 was a whole JSON document, read still).
FORMAT = 2
# The layout of a memory's keys, written in every record holding ``through`` (bases, merged runs, the note): 1 was a
# base and the records after it (thirteenth session), 2 adds merged runs (``<key>.<n>.<level>``) and the passed-over
# note (fourteenth). A reader refuses a record of a layout newer than its own, saying so, instead of loading part of
# the memory silently: a guard against layouts to come only. Releases before the field (before 96ca2cf) ignore it: one
# reading layout 1 stops at the first merged run of a layout-2 store, silently (every value merged after its base is
# lost to it), so every worker sharing a store is upgraded before any of them saves in layout 2. Absent: written
# before the field (layout 1 or 2, which a reader of 2 reads).
LAYOUT = 2
# Records (or runs of one level) merged into a run of the next level: at most FAN_IN - 1 of each level follow the
# base, so a load reads a bounded number of keys; each byte is written once a level it climbs.
FAN_IN = 8
# The highest level a run is merged to (8 ** 3 = 512 records); runs of it gather until the fold into the base.
MAX_LEVEL = 3
_MAGIC = b"cf-secrets"
_HEADER_RE = re.compile(rb"cf-secrets (\d+) (\d+) ([0-9a-f]{8})\n")
# The longest header: magic, format, a length of up to 20 digits, the checksum.
_HEADER_MAX = len(_MAGIC) + 1 + 4 + 1 + 20 + 1 + 8 + 1


@dataclass(frozen=True, slots=True)
class Record:
    """One stored record: its values (value -> kind), when it was saved, and for a base the last record it holds."""

    secrets: dict[str, str]
    saved_at: float | None
    through: int = 0


def base_key(key: str, slot: int) -> str:
    """The key of base ``slot`` (0 or 1).

    A fold writes the slot the current base is not in, then deletes what it folded: a fold cut short leaves the
    previous base and the records after it as they were.
    """
    return key if slot == 0 else f"{key}.b"


def segment_key(key: str, n: int) -> str:
    """The key of the ``n``-th record appended after the base ``key`` (1, 2, …)."""
    return f"{key}.{n}"


def passed_key(key: str) -> str:
    """The key of the marker saying through which record a fold or a merge passed (a record with no values).

    Written before the fold or the merge deletes what it passed over: a worker that appends a record at or below it
    (its next number was stale) knows no load will read it, and appends it again after the store's newest.
    """
    return f"{key}.p"


def run_key(key: str, start: int, level: int) -> str:
    """The key of the run of ``level`` (1, 2, …) that holds the records from number ``start`` on."""
    return f"{key}.{start}.{level}"


def run_records(level: int) -> int:
    """How many records a run of ``level`` holds (a record is of level 0)."""
    return int(FAN_IN ** level)


def record_place(store: BlobStore, key: str) -> str:
    """Where a record is, for an error: the store's file when it has one, and the key."""
    path = getattr(store, "path", None)
    return f"{path if path is not None else type(store).__name__}, secret memory record {key!r}"


def encode_record(secrets: Iterable[tuple[str, str]], saved_at: float, through: int | None = None) -> bytes:
    """The bytes of a record of ``secrets`` (a base when ``through`` is given)."""
    document: dict[str, Any] = {"saved_at": saved_at, "secrets": [[v, k] for v, k in secrets]}
    if through is not None:
        document["through"] = through
        document["layout"] = LAYOUT
    payload = json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return b"%s %d %d %08x\n" % (_MAGIC, FORMAT, len(payload), zlib.crc32(payload)) + payload


def decode_record(raw: bytes, place: str) -> Record | None:
    """The record in ``raw``; None when it is cut short (a save that never finished). CorruptRecord otherwise.

    A record of format 1 (one JSON document, no header) is read as a base holding no appended record.
    """
    if raw[:1] == b"{":
        return _record(_json(raw, place), place)
    if not _MAGIC.startswith(raw[:len(_MAGIC)]):
        raise CorruptRecord(f"{place}: not a secret memory record (it starts {raw[:16]!r})")
    header = _HEADER_RE.match(raw)
    if header is None:
        if b"\n" not in raw[:_HEADER_MAX]:
            return None  # (cut inside its header)
        raise CorruptRecord(f"{place}: the record's header is not one contextfold writes")
    if int(header[1]) != FORMAT:
        raise CorruptRecord(f"{place}: a record of format {int(header[1])}, this release reads {FORMAT} (and 1)")
    payload = raw[header.end():]
    length = int(header[2])
    if len(payload) < length:
        return None
    if len(payload) > length or zlib.crc32(payload) != int(header[3], 16):
        raise CorruptRecord(f"{place}: the record's checksum or length does not match its content")
    return _record(_json(payload, place), place)


def _json(data: bytes, place: str) -> Any:
    try:
        return json.loads(data.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CorruptRecord(f"{place}: not the JSON of a secret memory") from None


def _record(document: Any, place: str) -> Record:
    entries = document.get("secrets") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not all(
            isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], str) for e in entries):
        raise CorruptRecord(f"{place}: no list of [value, kind] pairs")
    saved = document.get("saved_at")
    through = document.get("through", 0)
    if type(through) is not int or through < 0:
        raise CorruptRecord(f"{place}: 'through' is no record number")
    layout = document.get("layout", LAYOUT)
    if type(layout) is not int or layout < 1:
        raise CorruptRecord(f"{place}: 'layout' is no layout number")
    if layout > LAYOUT:
        raise CorruptRecord(f"{place}: a secret memory kept in layout {layout} by a newer contextfold; this release "
                            f"reads layouts up to {LAYOUT} (upgrade every worker sharing the store)")
    return Record({e[0]: e[1] for e in entries},
                  float(saved) if isinstance(saved, int | float) and not isinstance(saved, bool) else None, through)


def memory_groups(keys: Iterable[str], prefix: str) -> Mapping[str, list[str]]:
    """The keys of each memory among ``keys`` (its base and records), by the tag after ``prefix``."""
    groups: dict[str, list[str]] = {}
    for key in keys:
        if key.startswith(prefix):
            groups.setdefault(key[len(prefix):].partition(".")[0], []).append(key)
    return groups


# -- the store's operations on a memory's keys (one step each where the store allows: put_new, put_if) --------

# Times the passed-over note is read and written again when another worker changed it in between (each time one
# did: a worker's note is then higher, or it changes again).
_MAX_NOTE_TRIES = 8

# (Their warnings are the memory's: logged under its module's name, as before they moved here.)
_log = logging.getLogger(__package__ + ".memory")


def key_at(key: str, n: int, level: int) -> str:
    """The key of the record (level 0) or the run of ``level`` that starts at record number ``n``."""
    return segment_key(key, n) if level == 0 else run_key(key, n, level)


def sweep_merged(store: BlobStore, key: str, start: int, level: int) -> None:
    """Delete what the run of ``level`` from record ``start`` merged, when the merge that wrote it left some of it.

    A merge deletes its group last first, so a merge killed before or among its deletes leaves the group's first
    member: looked for (one ``exists``; nothing more when it is gone), and when there, the whole group is deleted, and
    what each member merged in turn. Called only with the passed-over note at or above the run's last record and the
    run whole in the store: nothing under it is read by a load then (one that stops at a deleted key below the note
    reads the store again). A run of a release that deleted first to last, killed among its deletes, is not found.
    (Its last member is not looked for: that key can be another layout's live run or record, whose values a sweep
    of it would delete; the seventeenth stop's stress lost one so.)
    """
    if level == 0:
        return
    below, step = level - 1, run_records(level - 1)
    if not store.exists(key_at(key, start, below)):
        return
    for n in range(start + (FAN_IN - 1) * step, start - 1, -step):
        sweep_merged(store, key, n, below)
        store.delete(key_at(key, n, below))


def sweep_range(store: BlobStore, key: str, after: int, through: int) -> None:
    """Delete every record, and every run placed after a base through ``after``, within ``after + 1`` to ``through``.

    What a fold killed before its deletes left (see :meth:`SecretMemory._fold`): bounded by that fold's records (a
    delete each, and one per place a run of each level can start). Called with the note at or above ``through``.
    """
    for level in range(MAX_LEVEL, -1, -1):
        size = run_records(level)
        for n in range(after + 1, through + 2 - size, size):  # (a run wholly in the range: one reaching past it is
            store.delete(key_at(key, n, level))  # another layout's, and left as it was)


def over_cut_run(store: BlobStore, place: str, raw: bytes) -> bool:
    """Write ``raw`` over the run at ``place`` when that is cut short (a merge that never finished); True when written.

    Over what was read only (``put_if``): a whole run there, or one written since, is another worker's merge.
    """
    held = stored_bytes(store, place)
    if held is None or decode_record(held, record_place(store, place)) is not None:
        return False
    return put_if(store, place, raw, held)


# The store classes already said to lack a one-step put_new or put_if (each is said once a process).
_TOLD_NOT_ATOMIC: set[type] = set()
_ATOMIC_WRITES = ("put_new", "put_if")


def tell_if_not_atomic(store: BlobStore) -> None:
    """Warn, once per store class, when ``store`` writes a memory's records with the protocol's read-then-write.

    Two workers saving one session's memory at once rely on ``put_new`` and ``put_if`` being one step for the store:
    with the defaults (or none: a store that is no BlobStore subclass) a write of another worker between the read
    and the write is lost, and with it secrets that worker saved. One worker at a time is safe. Not raised: a store
    used by one process, the common case, loses nothing.
    """
    cls = type(store)
    if cls in _TOLD_NOT_ATOMIC:
        return
    from ..cache.blobs import BlobStore

    defaults = [name for name in _ATOMIC_WRITES
                if getattr(cls, name, None) in (None, getattr(BlobStore, name))]
    if defaults:
        _TOLD_NOT_ATOMIC.add(cls)
        _log.warning("secret memory over %s.%s: its %s %s the BlobStore protocol's default (read, then write), not "
                     "one step; workers sharing a session's secret memory in this store can lose each other's "
                     "secrets: implement %s atomically, or save a session's memory from one worker at a time",
                     cls.__module__, cls.__qualname__, " and ".join(defaults),
                     "is" if len(defaults) == 1 else "are", " and ".join(defaults))


def put_new(store: BlobStore, key: str, raw: bytes) -> bool:
    """``store.put_new``; for a store without it (not a BlobStore subclass), the protocol's default (check, write)."""
    put_new = getattr(store, "put_new", None)
    if callable(put_new):
        return bool(put_new(key, raw))
    from ..cache.blobs import BlobStore

    return BlobStore.put_new(store, key, raw)


def put_if(store: BlobStore, key: str, data: bytes | None, expected: bytes | None) -> bool:
    """``store.put_if``; for a store without it (not a BlobStore subclass) the protocol's default: read, then write."""
    put_if = getattr(store, "put_if", None)
    if callable(put_if):
        return bool(put_if(key, data, expected))
    from ..cache.blobs import BlobStore

    return BlobStore.put_if(store, key, data, expected)


def passed(store: BlobStore, key: str) -> int:
    """Through which record a fold or a merge of the memory ``key`` passed (0 when none did)."""
    record = stored_record(store, passed_key(key))
    return record.through if record is not None else 0


def note_passed(store: BlobStore, key: str, through: int, stale_above: int | None = None) -> bool | None:
    """Raise the memory's passed-over note to ``through`` (never lower it: another worker's may be further on).

    Written over the note read (``put_if``): another worker raising it between the read and the write makes this
    one read it again, so two workers passing over records at one instant leave the higher note (the lower one let
    a late third worker's record below the higher be lost). True when the note is at ``through`` or higher now;
    False when other workers kept changing it below ``through``: the caller must then delete nothing it passed over.
    None, raising nothing, when the note read is above ``stale_above`` (given): another worker folded or merged since
    the caller read the store.
    """
    place = passed_key(key)
    for _ in range(_MAX_NOTE_TRIES):
        raw = stored_bytes(store, place)
        held = None if raw is None else decode_record(raw, record_place(store, place))
        if stale_above is not None and held is not None and held.through > stale_above:
            return None
        if held is not None and held.through >= through:
            return True
        if put_if(store, place, encode_record((), time.time(), through=through), raw):
            return True
    if passed(store, key) >= through:
        return True
    _log.warning("%s: other workers kept changing the passed-over note; what was passed over is left as it was",
                 record_place(store, place))
    return False


def stored_bytes(store: BlobStore, key: str) -> bytes | None:
    from ..errors import RefNotFound

    try:
        return store.get(key)
    except RefNotFound:
        return None


def stored_record(store: BlobStore, key: str) -> Record | None:
    """The record under ``key`` (None when none, or cut short); CorruptRecord when it is no memory's record."""
    raw = stored_bytes(store, key)
    return None if raw is None else decode_record(raw, record_place(store, key))
