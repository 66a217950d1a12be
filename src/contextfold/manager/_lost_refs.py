"""Refs the store lost, said in the view itself (issue 21 §3: a Redis without persistence restarted).

A cut output or a masked placeholder shows a ref whose full text the store no longer holds: left as it is, the model
learns it only by trying to read it. Before each model call the manager asks the cache which of the view's refs were
lost since its last look (free unless the store reports a possible loss, then one batched check) and adds a note to
each message that shows one. The note is part of the message from then on (the history keeps it, so later requests
and the archive say the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..cache import ToolOutputCache
    from ..messages import Message
    from ._view import View

__all__ = ["LOST_META", "lost_note", "mark_lost_refs"]

# meta key of a message whose ref is gone: it is annotated once, and widening or a digest does not look it up again.
LOST_META = "ref_lost"


def lost_note(ref_id: str) -> str:
    """The line added to a message whose full output is gone."""
    return (f"[the full output of {ref_id} is no longer stored (the tool output store lost it): what is shown here is "
            f"all that is left; run the tool again if you need more]")


def mark_lost_refs(view: View, cache: ToolOutputCache) -> int:
    """Note in the view each message whose ref the store lost since the last look; returns how many were noted."""
    messages = view.raw
    gone = cache.newly_lost(lambda: [str(m.meta["ref"]) for m in messages if "ref" in m.meta
                                     and LOST_META not in m.meta])
    if not gone:
        return 0
    noted = 0
    for index, m in enumerate(messages):
        ref = m.meta.get("ref")
        if ref in gone and LOST_META not in m.meta:
            view.replace_at(index, _with_note(m, str(ref)))
            noted += 1
    return noted


def _with_note(m: Message, ref_id: str) -> Message:
    from ..messages import TextPart  # (loaded by then: the view holds messages; kept off the manager's import)

    note = lost_note(ref_id)
    if isinstance(m.content, str):
        return m.with_content(f"{m.content}\n{note}" if m.content else note).with_meta(**{LOST_META: True})
    return m.with_content((*m.content, TextPart(note))).with_meta(**{LOST_META: True})
