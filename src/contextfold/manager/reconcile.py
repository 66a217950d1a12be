"""Reconciling a framework's history with what a ContextManager has already been fed.

Agent frameworks hand their adapters the whole history before every model call, and users build adapters inline
(one per run, per request, per thread). The record of what the manager has seen therefore lives with the manager
(:class:`FrameworkHistory`, ``cm.framework_history``), never with an adapter object: any number of adapters over
one manager add each framework item once and never reorder.

Items are recognised by identity keys: the framework's own id where it has one, joined with a fingerprint of the
content, compared position by position. The usual case is a history that extends what was seen: only the new
items reach the manager. A history that no longer starts with what was seen (edited, truncated by the user,
another conversation) is rebuilt: the manager's view is archived (nothing is lost), replaced by the framework's
history, and a ``compact.warning`` event with code ``framework_history_diverged`` says where they parted.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..telemetry import CompactWarning

if TYPE_CHECKING:
    from ..messages import Message
    from ..telemetry import Tracer

__all__ = ["DIVERGED_CODE", "REPLACED_REASON", "FrameworkHistory", "Reconciled", "content_key", "pin_head", "rebase",
           "reconcile", "unpinned"]


class ContextManager(Protocol):
    """What reconciling needs of a :class:`~contextfold.ContextManager` (named so, as it is the only implementer)."""

    framework_history: FrameworkHistory
    session_id: str
    tracer: Tracer

    def messages(self) -> list[Message]: ...

    def add(self, messages: Sequence[Message] | Message, *, format: str | None = None) -> None: ...

    def rewrite_view(self, rewrite: Callable[[list[Message]], list[Message]], *, reason: str) -> int: ...

T = TypeVar("T")

# The reason recorded with the MessagesPruned event when the framework's history diverged and the view was rebuilt.
REPLACED_REASON = "framework_history_replaced"
# The code of the warning event that says the framework's history diverged from the manager's record.
DIVERGED_CODE = "framework_history_diverged"
# Hex digits of a content fingerprint: collisions within one conversation are out of reach, keys stay small.
KEY_DIGEST_CHARS = 20


def content_key(item: Any, ident: str | None = None) -> str:
    """An identity key: the framework's id (when it has one) and a fingerprint of the content."""
    data = json.dumps(item, sort_keys=True, default=repr, ensure_ascii=False)
    digest = hashlib.blake2b(data.encode("utf-8", "surrogatepass"), digest_size=KEY_DIGEST_CHARS // 2).hexdigest()
    return f"{ident}#{digest}" if ident else digest


class FrameworkHistory:
    """What each framework adapter has fed the manager: identity keys per source, and adapter data by name.

    One per ContextManager (``cm.framework_history``). ``slot`` keeps data an adapter derives from the history
    (the framework objects behind the manager's messages), so that a new adapter object finds it again.
    """

    def __init__(self) -> None:
        self._known: dict[str, list[str]] = {}
        self._slots: dict[str, Any] = {}
        self.lock = threading.RLock()
        self.rebuilds = 0
        self.pinned: set[str] = set()  # ids of the pinned system prompts (see pin_head)

    def known(self, source: str) -> list[str] | None:
        """The keys of the history ``source`` last reported, or None when it never reported one."""
        keys = self._known.get(source)
        return list(keys) if keys is not None else None

    def remember(self, source: str, keys: Sequence[str]) -> None:
        """``source``'s history is now ``keys`` (its adapter replaced it with the manager's view, say)."""
        self._known[source] = list(keys)

    def slot(self, name: str, factory: Callable[[], T]) -> T:
        """The adapter data stored under ``name``, made by ``factory`` on first use."""
        with self.lock:
            value = self._slots.get(name)
            if value is None:
                value = self._slots[name] = factory()
            return value

    def forget(self) -> None:
        """Forget every source (the manager's view was cleared)."""
        with self.lock:
            self._known.clear()
            self._slots.clear()
            self.pinned.clear()


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What :func:`reconcile` did: how many items were new, and whether the view was rebuilt."""

    fresh: int
    rebuilt: bool


def reconcile(cm: ContextManager, source: str, items: Sequence[T], *, key: Callable[[T], str],
              convert: Callable[[Sequence[T]], list[Message]],
              before_add: Callable[[Sequence[T]], None] | None = None,
              shorter_ok: bool = False) -> Reconciled:
    """Feed the manager the items of ``items`` it has not seen from ``source``; rebuild the view on divergence.

    Args:
        cm: The manager.
        source: Names the framework history (one per adapter family: a Session and an input filter over one
            manager share theirs).
        items: The framework's whole history, oldest first.
        key: An item's identity key (see :func:`content_key`).
        convert: Framework items -> Messages.
        before_add: Sees the new items first (adapters record the usage a new reply carries); not called when the
            view is rebuilt, as that usage describes another view.
        shorter_ok: A history that is a prefix of what was seen is not a divergence (a Session hears of items the
            input filter already fed).
    """
    record = cm.framework_history
    keys = [key(item) for item in items]
    with record.lock:
        known = record.known(source)
        rebuilt = False
        if known is None and unpinned(cm, cm.messages()):
            fresh: list[T] = list(items)
            rebuilt = _rebuild(cm, f"the manager already holds a conversation that {source} never reported; "
                                           f"the view is rebuilt from the framework's {len(items)} items")
        elif known is None or keys[:len(known)] == known:
            fresh = list(items[len(known or ()):])
            if fresh and before_add is not None:
                before_add(fresh)
        elif shorter_ok and known[:len(keys)] == keys:
            return Reconciled(0, False)
        else:
            at = next((i for i, (a, b) in enumerate(zip(known, keys, strict=False)) if a != b),
                      min(len(known), len(keys)))
            fresh = list(items)
            rebuilt = _rebuild(cm, f"{source}'s history differs from the one this manager was fed at item {at} "
                                           f"({len(known)} items fed, {len(items)} now): the view is rebuilt from "
                                           "the framework's history (the old view is archived)")
        if fresh:
            cm.add(convert(fresh))
        record.remember(source, keys)
        return Reconciled(len(fresh), rebuilt)


def _rebuild(cm: ContextManager, why: str) -> bool:
    cm.framework_history.rebuilds += 1
    cm.tracer.emit(CompactWarning(session_id=cm.session_id, message=why, code=DIVERGED_CODE))
    # The pinned system prompt is not part of the framework's history: it stays.
    pinned = cm.framework_history.pinned
    cm.rewrite_view(lambda view: [m for m in view if m.meta.get("id") in pinned], reason=REPLACED_REASON)
    return True


def rebase(cm: ContextManager, source: str, items: Sequence[T], key: Callable[[T], str]) -> None:
    """The framework now holds ``items`` (the adapter replaced its history with the manager's view)."""
    cm.framework_history.remember(source, [key(item) for item in items])


def pin_head(cm: ContextManager, message_id: str, text: str) -> None:
    """Keep ``text`` as the pinned system message that opens the view (a framework's system prompt).

    Frameworks send their system prompt in a field of its own, outside the history: pinned here, it is counted
    against the window and survives every compaction. A changed prompt replaces the old one in place.
    """
    from ..messages import Message

    record = cm.framework_history
    with record.lock:
        record.pinned.add(message_id)
        view = cm.messages()
        if view and view[0].meta.get("id") == message_id and view[0].text == text:
            return
        pinned = Message("system", text, meta={"id": message_id})
        if not view:
            cm.add(pinned)
            return
        cm.rewrite_view(lambda v: [pinned, *(m for m in v if m.meta.get("id") != message_id)],
                        reason="system_prompt_changed")


def unpinned(cm: ContextManager, messages: Sequence[Message]) -> list[Message]:
    """``messages`` without the pinned system prompts (the framework sends those in their own field)."""
    pinned = cm.framework_history.pinned
    return [m for m in messages if m.meta.get("id") not in pinned]
