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

One removal is mirrored instead of rebuilt: complete tool exchanges (a call and every one of its results) that the
framework dropped, the rest in order, new items after. A LangGraph node that calls an agent and gives its parent
only the reply makes exactly that history; rebuilding for it cost a whole re-add of the history on every run. The
adapter says which items are tool calls and results (``exchange``); the view loses the same exchanges (the old view
is archived first) and gains the new items.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..telemetry import CompactWarning

if TYPE_CHECKING:
    from ..messages import Message
    from ..telemetry import Tracer

__all__ = ["DIVERGED_CODE", "EXCHANGES_DROPPED_REASON", "REPLACED_REASON", "Exchange", "FrameworkHistory",
           "Reconciled", "content_key", "pin_head", "rebase", "reconcile", "unpinned"]


class ContextManager(Protocol):
    """What reconciling needs of a :class:`~contextfold.ContextManager` (named so, as it is the only implementer)."""

    framework_history: FrameworkHistory
    session_id: str
    tracer: Tracer

    def messages(self) -> list[Message]: ...

    def add(self, messages: Sequence[Message] | Message, *, format: str | None = None) -> None: ...

    def rewrite_view(self, rewrite: Callable[[list[Message]], list[Message]], *, reason: str) -> int: ...

T = TypeVar("T")

# What an item is in a tool exchange: ("call", the ids of its tool calls) or ("result", (the id it answers,)).
Exchange = tuple[str, tuple[str, ...]]

# The reason recorded with the MessagesPruned event when the framework's history diverged and the view was rebuilt.
REPLACED_REASON = "framework_history_replaced"
# The code of the warning event that says the framework's history diverged from the manager's record.
DIVERGED_CODE = "framework_history_diverged"
# The reason recorded with the MessagesPruned event when the framework dropped complete tool exchanges.
EXCHANGES_DROPPED_REASON = "framework_dropped_tool_exchanges"
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
        self._exchanges: dict[str, dict[str, Exchange]] = {}  # per source: key -> its part in a tool exchange
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
        exchanges = self._exchanges.get(source)
        if exchanges and len(exchanges) > 2 * len(keys):  # (keys that left the history: bounded, pruned at times)
            kept = set(keys)
            self._exchanges[source] = {k: v for k, v in exchanges.items() if k in kept}

    def note_exchanges(self, source: str, keys: Sequence[str], parts: Sequence[Exchange | None]) -> None:
        """The tool-exchange part of each of ``keys`` (None: not a tool call or result)."""
        exchanges = self._exchanges.setdefault(source, {})
        for key, part in zip(keys, parts, strict=True):
            if part is not None:
                exchanges[key] = part

    def exchanges(self, source: str) -> Mapping[str, Exchange]:
        """The tool-exchange parts noted for ``source``'s keys."""
        return self._exchanges.get(source, {})

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
            self._exchanges.clear()
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
              shorter_ok: bool = False, exchange: Callable[[T], Exchange | None] | None = None) -> Reconciled:
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
        exchange: An item's part in a tool exchange (``("call", ids)``, ``("result", (id,))``) or None: with it,
            complete exchanges the framework dropped are dropped from the view too, without a rebuild.
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
        elif exchange is not None and (dropped := _dropped_exchanges(known, keys, record.exchanges(source))) \
                and _drop_exchanges(cm, dropped[0]):
            fresh = list(items[dropped[1]:])
            if fresh and before_add is not None:
                before_add(fresh)
        else:
            at = next((i for i, (a, b) in enumerate(zip(known, keys, strict=False)) if a != b),
                      min(len(known), len(keys)))
            fresh = list(items)
            rebuilt = _rebuild(cm, f"{source}'s history differs from the one this manager was fed at item {at} "
                                           f"({len(known)} items fed, {len(items)} now): the view is rebuilt from "
                                           "the framework's history (the old view is archived)")
        if fresh:
            cm.add(convert(fresh))
            if exchange is not None:
                record.note_exchanges(source, keys[len(keys) - len(fresh):], [exchange(item) for item in fresh])
        record.remember(source, keys)
        return Reconciled(len(fresh), rebuilt)


def _dropped_exchanges(known: Sequence[str], keys: Sequence[str],
                       exchanges: Mapping[str, Exchange]) -> tuple[frozenset[str], int] | None:
    """When ``keys`` is ``known`` less complete tool exchanges, then new items: (their call ids, where new starts)."""
    calls: set[str] = set()
    results: set[str] = set()
    at = 0
    for old in known:
        if at < len(keys) and keys[at] == old:
            at += 1
            continue
        part = exchanges.get(old)
        if part is None:
            return None  # something other than a tool call or result is gone
        (calls if part[0] == "call" else results).update(part[1])
    if not calls or calls != results:
        return None  # nothing dropped, or a call without all its results (or results without their call)
    return frozenset(calls), at


def _drop_exchanges(cm: ContextManager, calls: frozenset[str]) -> bool:
    """Drop the tool exchanges ``calls`` from the view; False (nothing changed) when a call shares its message."""
    def without(view: list[Message]) -> list[Message]:
        return [m for m in view if not ((m.role == "tool" and m.tool_call_id in calls)
                                        or (m.tool_calls and all(c.id in calls for c in m.tool_calls)))]

    view = cm.messages()
    if any(m.tool_calls and any(c.id in calls for c in m.tool_calls)
           and not all(c.id in calls for c in m.tool_calls) for m in view):
        return False  # a message holding a dropped call and a kept one (merged): rebuilt instead
    cm.rewrite_view(without, reason=EXCHANGES_DROPPED_REASON)
    return True


def _rebuild(cm: ContextManager, why: str) -> bool:
    cm.framework_history.rebuilds += 1
    cm.tracer.emit(CompactWarning(session_id=cm.session_id, message=why, code=DIVERGED_CODE))
    # The pinned system prompt is not part of the framework's history: it stays.
    pinned = cm.framework_history.pinned
    cm.rewrite_view(lambda view: [m for m in view if m.meta.get("id") in pinned], reason=REPLACED_REASON)
    return True


def rebase(cm: ContextManager, source: str, items: Sequence[T], key: Callable[[T], str],
           exchange: Callable[[T], Exchange | None] | None = None) -> None:
    """The framework now holds ``items`` (the adapter replaced its history with the manager's view)."""
    keys = [key(item) for item in items]
    if exchange is not None:
        cm.framework_history.note_exchanges(source, keys, [exchange(item) for item in items])
    cm.framework_history.remember(source, keys)


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
