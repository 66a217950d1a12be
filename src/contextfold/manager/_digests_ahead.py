"""The read-ahead's reading of tool outputs: each output's digest material, and its placeholder built and counted.

The part of :func:`~contextfold.manager._compactor.warm_for_compaction` that reads the outputs a masking may take
soon (see :mod:`._read_ahead` for which, and when). A module of its own, imported by the first read-ahead that
reads an output: what it needs is imported once with it, not by each of the background thread's jobs (issue 22: a
job's imports inside the function were ~15 us of each turn's read-ahead).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from ..cache._digest import Material, digest_material, ref_material
from ..cache.masking import placeholder_ahead
from ._read_ahead import ScanningInBulk

if TYPE_CHECKING:
    from ..cache import ToolOutputCache
    from ..messages import Message
    from ..telemetry._pace import GilPacer
    from ..tokens import TokenCounter

__all__ = ["DIGEST_ITEMS_SCANNED_AHEAD", "read_digests"]

# Of a tool output's digest material, the read-ahead scans this many first items for secrets when it builds no
# placeholder (a digest of the default 40 tokens lists about a dozen; items that do not fit are skipped for shorter
# ones further down).
DIGEST_ITEMS_SCANNED_AHEAD = 32


def read_digests(digests: Iterable[tuple[Message, str]], outputs: ToolOutputCache, redactor: Any,
                 digest_tokens: int, counter: TokenCounter | None, pacer: GilPacer, digest_kind: str = "full") -> None:
    """Read each output's digest material; with ``digest_tokens`` and ``counter``, build and count its placeholder.

    ``digests``: the outputs with their calls' arguments (what stays in view beside the placeholder). The part of
    :func:`~contextfold.manager._compactor.warm_for_compaction` that reads tool outputs (see there). A light digest
    (``digest_kind``) has no ranked material: its placeholder is built and counted, and nothing else is read.
    """
    if digest_kind != "full":
        if digest_tokens and counter is not None:
            for m, known in digests:
                if isinstance(m.content, str):
                    placeholder_ahead(m, outputs, digest_tokens=digest_tokens, known=known, counter=counter,
                                      secrets=redactor, digest_kind=digest_kind)
                pacer.tick()
        return
    bulk = redactor is not None and hasattr(redactor, "scan_words")
    for m, known in digests:
        if not isinstance(m.content, str):
            continue
        ref = m.meta.get("ref")
        state = redactor.digest_state() if redactor is not None else None
        read: tuple[Material, Hashable] | None = None
        if isinstance(ref, str) and outputs.contains(ref):
            material = ref_material(ref, partial(outputs.get, ref), redactor.blank if redactor is not None else None,
                                    state=state)
        else:
            # As the masking will read it: with the session's secrets blanked (otherwise another text, and the
            # masking turn read it cold: 26 of lm32b's 1,624 outputs hold a password or a key). The placeholder takes
            # it at the same state (issue 22: it blanked the output again).
            material = digest_material(redactor.blank(m.content) if redactor is not None else m.content)
            read = (material, state)
        if digest_tokens and counter is not None:
            # The placeholder itself, built and counted as the masking will (the same digest, each item it weighs
            # counted and checked for secrets, the answers remembered): the masking turn looks it up (issue 22:
            # counting and checking were a quarter of a masking turn). The items it asks the secrets about are
            # cleared in bulk, a few at a time, as the digest asks (see ScanningInBulk).
            guard = ScanningInBulk(redactor, material.items, known) if bulk else redactor
            placeholder_ahead(m, outputs, digest_tokens=digest_tokens, known=known, counter=counter, secrets=guard,
                              material=read)
        elif bulk:
            # The items a digest most likely lists are checked for secrets then: scanned now (in bulk), the masking
            # turn finds the scans done (issue 22: a masking turn scanned ~40 items).
            redactor.scan_words(material.items[:DIGEST_ITEMS_SCANNED_AHEAD])
        elif redactor is not None:
            for item in material.items[:DIGEST_ITEMS_SCANNED_AHEAD]:
                redactor.mentions_secret(item)
        pacer.tick()
