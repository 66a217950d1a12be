"""The in-context view, kept normalized, counted and encoded incrementally.

``prepare()`` must cost O(new messages), not O(history) (DESIGN.md principle 6). The view keeps a *settled
prefix*: messages already normalized, every call in them answered inside them, ending right before an assistant
message. Only the tail after it is normalized, counted and encoded on each call; the prefix's token total and its
encodings per wire format are kept. Anything that rewrites the middle (masking, compaction) resets the prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .messages import Message
from .normalize import normalize
from .tokens import MessageCounter

__all__ = ["View"]

_PINNED_ROLES = frozenset({"system", "developer"})


class View:
    """The messages the model sees, with incremental totals. Not thread-safe: the manager holds the lock."""

    def __init__(self, counter: MessageCounter) -> None:
        self.counter = counter
        self._messages: list[Message] = []
        self.version = 0  # bumps whenever something other than an append changes the view
        self._settled = 0  # view[:settled] is normalized, closed, and ends before an assistant message
        self._settled_tokens = 0
        self._settled_tool_tokens = 0
        self._opened = False  # the settled prefix holds a non-system message
        self._encoded: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self._tail_cache: tuple[tuple[int, int, int], list[Message]] | None = None

    # -- reading ------------------------------------------------------------------------------------------------------
    @property
    def raw(self) -> list[Message]:
        """The stored messages (the tail not yet normalized). Do not mutate."""
        return self._messages

    def __len__(self) -> int:
        return len(self._messages)

    def normalized(self) -> list[Message]:
        """The view as it would be sent: settled prefix plus the normalized tail."""
        self._settle()
        out = self._messages[: self._settled]
        out.extend(self._normalized_tail())
        return out

    def totals(self) -> tuple[int, int, int]:
        """(tokens, tool-output tokens, message count) of :meth:`normalized`, counting only the tail anew."""
        self._settle()
        tail = self._normalized_tail()
        tokens = self._settled_tokens + sum(self.counter.count_message(m) for m in tail)
        tool = self._settled_tool_tokens + sum(self.counter.count_message(m) for m in tail if m.role == "tool")
        return tokens, tool, self._settled + len(tail)

    def encoded(self, wire: Any) -> list[dict[str, Any]]:
        """The normalized view in ``wire``'s list form; the settled prefix is encoded once and reused.

        The dicts of the settled prefix are shared between calls: callers must not mutate them. The messages
        after the latest assistant turn (where one adds ``cache_control``) are fresh dicts on every call.

        Boundaries sit right before assistant messages, where no format merges a message with its neighbour, so
        encoding the prefix and the tail apart gives the same list as encoding the whole.
        """
        self._settle()
        upto, prefix = self._encoded.get(wire.NAME, (0, []))
        if upto < self._settled:
            prefix.extend(wire.encode(self._messages[upto : self._settled]))
            self._encoded[wire.NAME] = (self._settled, prefix)
        out = prefix.copy()
        out.extend(wire.encode(self._normalized_tail()))
        return out

    # -- writing ------------------------------------------------------------------------------------------------------
    def append(self, messages: Iterable[Message]) -> None:
        """Add messages at the end (the settled prefix and its caches stay valid)."""
        self._messages.extend(messages)

    def replace(self, messages: Sequence[Message]) -> None:
        """Replace the whole view (after masking or compaction); totals and encodings are rebuilt lazily."""
        self._messages = list(messages)
        self.version += 1
        self._settled = 0
        self._settled_tokens = 0
        self._settled_tool_tokens = 0
        self._opened = False
        self._encoded.clear()

    # -- internals ----------------------------------------------------------------------------------------------------
    def _normalized_tail(self) -> list[Message]:
        # prepare() asks for the tail three times (totals, decision, encoding); normalize it once per state.
        key = (self.version, len(self._messages), self._settled)
        cached = self._tail_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        tail = normalize(self._messages[self._settled :], opening=not self._opened)
        self._tail_cache = (key, tail)
        return tail

    def _settle(self) -> None:
        """Move the settled boundary up to the last assistant message, repairing that segment for good.

        A call before the latest assistant turn that still has no result will not get one (the agent moved on),
        so its synthetic "aborted" result is kept from now on.
        """
        msgs = self._messages
        end = len(msgs) - 1
        while end > self._settled and msgs[end].role != "assistant":
            end -= 1
        if end <= self._settled:
            return
        segment = msgs[self._settled : end]
        fixed = normalize(segment, opening=not self._opened)
        if fixed != segment:
            msgs[self._settled : end] = fixed
        count = self.counter.count_message
        for m in fixed:
            n = count(m)
            self._settled_tokens += n
            if m.role == "tool":
                self._settled_tool_tokens += n
            if m.role not in _PINNED_ROLES:
                self._opened = True
        self._settled += len(fixed)
