"""Collecting what sessions left in the blob store, at the age the instances sharing it keep sessions for.

Nothing of a proxied turn collects the blob store (a manager's cache runs the store-wide retention every 200 outputs
it stores, and the proxy's managers live one turn), and a Redis session expires unseen: its tool outputs, claims,
secret memory, learned limits and an abandoned lease stayed for good. ``Backend.collect_blobs`` deletes them once
no session has used them for the sessions' age (:func:`collect`).

Instances sharing one store can be told different ages (two configs over one Redis, a rolling change of
``session_max_age_s``): one collecting at its shorter age deleted the outputs of sessions another instance keeps.
Each instance notes its age in the store when it collects (:data:`AGES_KEY`, by compare-and-set; one entry per age,
:func:`collection_instance`: instances of one age share it, and a restart adds none), and collection uses the
longest age noted: an instance keeping sessions for ``X`` seconds is
counted for ``X`` seconds after it last said so (its sessions expire by then anyway), one keeping them for good
(None) for :data:`FOR_GOOD_NOTED_S`. Instances that predate the note are not counted.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import RefNotFound
from .leases import drop_abandoned_leases

__all__ = ["AGES_KEY", "FOR_GOOD_NOTED_S", "collect", "collection_age", "collection_instance"]

# The blob-store key of the instances' session ages (not a ref id, claim, memory or limit key: retention leaves it).
AGES_KEY = "serve-collection.session-ages"
# How long an instance that keeps sessions for good (session_max_age_s None) stops others collecting after it last
# said so: a retired one must not stop collection for ever.
FOR_GOOD_NOTED_S = 30 * 24 * 3600.0
# Compare-and-set rounds of noting an age that other instances keep changing under it.
_MAX_TRIES = 8


def collection_instance(age: float | None) -> str:
    """The name an instance keeping sessions for ``age`` seconds (None: for good) notes its age under.

    By its age, not a random id per process: each restart added an entry, kept until it lapsed. Instances of one
    age sharing an entry lose nothing: the entry counts that age as long as any of them last said so.
    """
    return "age-for-good" if age is None else f"age-{age!r}"


def collection_age(store: Any, instance: str, age: float | None, now: float) -> float:
    """The longest session age of the instances sharing ``store``, ``age`` included (inf: one keeps them for good).

    Notes ``instance``'s ``age`` (None: for good) at ``now`` in the store first. An entry is dropped once it is past
    the age it names (or :data:`FOR_GOOD_NOTED_S`). A note that cannot be written (others kept changing it) still
    counts the entries read.
    """
    noted: dict[str, tuple[float | None, float]] = {}
    for _ in range(_MAX_TRIES):
        try:
            current: bytes | None = store.get(AGES_KEY)
        except RefNotFound:
            current = None
        noted = {name: entry for name, entry in _entries(current).items() if not _lapsed(entry, now)}
        noted[instance] = (age, now)
        written = json.dumps({name: [kept, seen] for name, (kept, seen) in noted.items()}).encode()
        if store.put_new(AGES_KEY, written) if current is None else store.put_if(AGES_KEY, written, current):
            break
    return max(math.inf if kept is None else kept for kept, _ in noted.values())


def collect(store: Any, instance: str, age: float | None, now: float, *, leases: bool) -> int:
    """Delete what sessions unused for the collection age left in ``store``; how many tool outputs went.

    Tool outputs (with their claims and line indexes), secret memories and learned limits go by the cache's
    store-wide retention at that age, no size cap (it would evict outputs of sessions still in use). ``leases``: the
    leases are in ``store`` with no time to live (not Redis's): those whose holders' time is long past go too.
    """
    from ..cache import ToolOutputCache
    from ..cache.owners import Retention

    max_age = collection_age(store, instance, age, now)
    if math.isinf(max_age):
        return 0
    result = ToolOutputCache(store, retention=Retention(max_age_s=max_age, max_bytes=None)).retain(now)
    if leases:
        drop_abandoned_leases(store, now)
    return len(result.deleted)


def _entries(held: bytes | None) -> dict[str, tuple[float | None, float]]:
    """The note's entries as stored; what another writer left unreadable is left out (rewritten without it)."""
    if held is None:
        return {}
    try:
        value = json.loads(held)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(value, dict):
        return {}
    entries: dict[str, tuple[float | None, float]] = {}
    for name, entry in value.items():
        if isinstance(entry, list) and len(entry) == 2 and _number(entry[1]) and \
                (entry[0] is None or (_number(entry[0]) and entry[0] > 0)):
            entries[name] = (entry[0], entry[1])
    return entries


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _lapsed(entry: tuple[float | None, float], now: float) -> bool:
    kept, seen = entry
    return now - seen > (FOR_GOOD_NOTED_S if kept is None else kept)
