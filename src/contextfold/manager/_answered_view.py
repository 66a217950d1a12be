"""The answered tool output, shown wider while the model answers it.

Write-time truncation cuts a big output to a view sized for a history of many outputs. The output the model is
about to answer is the one it reads most closely (the line numbers it pages to next, the values it copies), so
while it is answered it is shown wider, whole when it fits, within the room the window has left. As soon as the
agent moves on (a new turn is added) it goes back to its standard view, so the wider view is paid for in one call
only and never reaches the history that masking and compaction decide on, unless putting it back would cost more
prompt cache than reading it again saves (the manager's ``CacheEconomics`` keeps it then, as part of the history).

:func:`widen_answered` and :func:`narrowed` are pure over the view and the cache; :class:`AnsweredWidening` is the
part the manager holds: it widens after the policy ran, remembers each standard view, and narrows when a new turn
arrives (or before the next decision).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..answered import answered_indices
from ..errors import RefNotFound, StoreError
from ..messages import Message

if TYPE_CHECKING:
    from ..cache import ToolOutputCache
    from ..tokens import MessageCounter
    from ._view import View

__all__ = [
    "WIDENED_META", "WIDEN_FACTOR", "WIDEN_MIN_TOKENS", "AnsweredWidening", "narrowed", "widen_answered", "widenable",
]

# meta key of an answered output shown wider than its standard view (its value: True).
WIDENED_META = "widened"
# By default the answered output may be shown up to this many times its write-time cap, and at least this many
# tokens (a file view of ~500 lines), room permitting: in small windows the write-time cap is a few hundred lines,
# while a huge output stays cut (the model pages through it with the retrieval tools instead of paying for it whole).
WIDEN_FACTOR = 2
WIDEN_MIN_TOKENS = 8_000
# A wider view that adds less than this share to the standard one is not worth a rewrite of the message.
MIN_GAIN_SHARE = 0.1


def widenable(m: Message) -> bool:
    """Whether ``m`` is a tool output cut at write time that a wider view could show more of."""
    return (m.role == "tool" and m.kind == "truncated" and isinstance(m.content, str)
            and isinstance(m.meta.get("ref"), str) and not m.meta.get(WIDENED_META))


def widen_answered(view: Sequence[Message], *, room: int, limit: int, cache: ToolOutputCache,
                   counter: MessageCounter, answered: Sequence[int] | None = None) -> dict[int, Message]:
    """Wider views of the answered outputs of ``view`` that were cut at write time: ``{index: widened message}``.

    The answered outputs share ``room`` tokens (what the window has left) evenly; none grows past ``limit``
    tokens. An output that fits whole is shown whole. Nothing is returned for outputs the room cannot widen
    by at least :data:`MIN_GAIN_SHARE`. ``answered``: ``answered_indices(view)`` when the caller knows it already.
    """
    found = answered_indices(view) if answered is None else answered
    targets = [i for i in found if widenable(view[i])]
    if not targets or room <= 0 or limit <= 0:
        return {}
    share = room // len(targets)
    out: dict[int, Message] = {}
    for i in targets:
        m = view[i]
        current = counter.count_message(m)
        cap = min(limit, current + share)
        if cap < current * (1 + MIN_GAIN_SHARE):
            continue
        ref_id = str(m.meta["ref"])
        try:
            text = cache.get(ref_id)
            whole = m.with_content(text)
            if counter.count_message(whole) <= cap:
                out[i] = whole.with_meta(**{WIDENED_META: True})
                continue
            ref = cache.ref(ref_id)
        except (RefNotFound, StoreError):
            # Gone from the store (a Redis restarted empty, an eviction, a TTL, another process's retention), out of
            # reach, or not this session's (a forged ref): the cut view is in the message already and goes as it is.
            continue
        body_cap = cap - (current - counter.counter.count(m.text))  # the message envelope stays what it was
        wide = m.with_content(cache.view_for(text, ref, max_tokens=max(1, body_cap)))
        if counter.count_message(wide) >= current * (1 + MIN_GAIN_SHARE):
            out[i] = wide.with_meta(**{WIDENED_META: True})
    return out


def narrowed(message: Message, cache: ToolOutputCache, standard: Message | None = None) -> Message:
    """``message`` back in its standard view when it was widened; otherwise ``message`` itself.

    ``standard`` is the message as it was before widening, when the caller kept it; otherwise the standard view
    is rendered again from the cache (the same view: rendering is deterministic).
    """
    if not message.meta.get(WIDENED_META):
        return message
    if standard is not None:
        return standard
    ref_id = str(message.meta["ref"])
    view = cache.view_for(cache.get(ref_id), cache.ref(ref_id))
    return message.with_content(view).with_meta(**{WIDENED_META: None})


class AnsweredWidening:
    """The answered outputs shown wider for the coming call, and the standard views they go back to."""

    def __init__(self, cache: ToolOutputCache, counter: MessageCounter) -> None:
        self.cache = cache
        self.counter = counter
        self._standard: dict[str, Message] = {}  # meta id -> the message in its standard (write-time) view

    @property
    def active(self) -> bool:
        """Whether some output of the view is shown wider now."""
        return bool(self._standard)

    def limit(self, configured: int | None, window: int) -> int:
        """Tokens an answered output may take: ``configured`` (0: never widened), or the default for ``window``."""
        if configured is not None:
            return configured
        return max(WIDEN_FACTOR * self.cap(window), WIDEN_MIN_TOKENS)

    def cap(self, window: int) -> int:
        """The write-time cap of one output in a ``window``-token context (what a wider view is measured against)."""
        return self.cache.config.message_tokens(window)

    @staticmethod
    def has_candidate(view: View) -> bool:
        """Whether an answered output of ``view`` was cut at write time (what :meth:`widen` could show wider).

        Read from the tail only, as :meth:`widen` reads it: most calls have none, and then neither the limit, the
        cache economics' say nor the room is worth working out (issue 22: ~7 us of a no-op ``prepare()``'s ~100).
        """
        start, tail = view.tail()
        if not any(widenable(m) for m in tail):
            return False
        return any(widenable(tail[i - start]) for i in view.answered() if i >= start)

    def widen(self, view: View, *, room: Callable[[], int], limit: int) -> None:
        """Show the answered outputs of ``view`` cut at write time wider, within ``room()`` tokens, each ≤ ``limit``.

        ``room`` is asked once there is an output to widen, on exact counts: byte upper bounds (the tokenizer still
        loading) would leave less room, and the view sent would depend on when the tokenizer finished loading.
        """
        if limit <= 0:
            return
        # Only the tail is read (O(new messages), issue 22): the answered results and their call are always in it.
        start, tail = view.tail()
        if not any(widenable(m) for m in tail):
            return  # (most calls: the tail holds no output cut at write time; answered() is not worth reading then)
        answered = [i - start for i in view.answered() if i >= start]
        if not any(widenable(tail[i]) for i in answered):
            return
        self.counter.wait_exact()
        wider = widen_answered(tail, room=room(), limit=limit, cache=self.cache, counter=self.counter,
                               answered=answered)
        raw = view.raw
        for i, message in wider.items():
            index = next((k for k in range(start, len(raw)) if raw[k] is tail[i]), None)
            if index is None:
                continue
            self._standard[str(message.meta.get("id"))] = tail[i]
            view.replace_at(index, message)

    def narrow(self, view: View, keep: Callable[[int, Message, Message], bool] | None = None) -> int:
        """Put every widened output of ``view`` back in its standard view; returns how many went back.

        ``keep(index, wide, standard)`` may keep one wider for good instead: putting it back rewrites the history
        from it on, which with prompt caching can cost more than reading the wider view again (``CacheEconomics``).
        A kept output is part of the history from then on, as if it had been written at that size.
        """
        if not self._standard:
            return 0
        put_back = 0
        # Latest first, as they stand in the view; each is found again by its id right before it changes, so that
        # nothing keep() or a put-back does to the view can make a change land on another message.
        for key in self._widened_ids(view.raw):
            standard = self._standard[key]
            if keep is not None:
                # Settled first: keep() counts the view, and a settle inside it (the first since a rewrite_view() left
                # an orphan result, or since a put-back reset the prefix) drops or adds messages (red team 19).
                view.tail()
                index = self._index_of(view.raw, key)
                if index is not None and keep(index, view.raw[index], standard):
                    del self._standard[key]
                    continue
            index = self._index_of(view.raw, key)
            if index is not None:
                view.replace_at(index, narrowed(view.raw[index], self.cache, standard))
                put_back += 1
            # (Forgotten only once put back: if keep() raises, what is still widened is put back by the next narrow.)
            del self._standard[key]
        self._standard.clear()  # (the widened outputs a rewrite took out of the view)
        return put_back

    def _widened_ids(self, raw: Sequence[Message]) -> list[str]:
        """The ids of the widened outputs in ``raw`` this object remembers a standard view of, latest first."""
        out: list[str] = []
        for index in range(len(raw) - 1, -1, -1):
            if len(out) == len(self._standard):
                break  # (the widened outputs are the answered ones, at the end: the history is not read)
            m = raw[index]
            key = str(m.meta.get("id"))
            if m.meta.get(WIDENED_META) and key in self._standard and key not in out:
                out.append(key)
        return out

    @staticmethod
    def _index_of(raw: Sequence[Message], key: str) -> int | None:
        """Where the widened output whose id is ``key`` stands in ``raw`` now (searched from the end), or None."""
        for index in range(len(raw) - 1, -1, -1):
            m = raw[index]
            if m.meta.get(WIDENED_META) and str(m.meta.get("id")) == key:
                return index
        return None
