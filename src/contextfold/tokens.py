"""Token counting (interface stub: the tokens work fills in tiktoken, overheads, usage tracking)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .messages import Message

__all__ = ["EstimatingCounter", "MessageCounter", "TokenCounter"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text. One method; implement it to plug in any tokenizer."""

    def count(self, text: str) -> int:
        """The number of tokens ``text`` encodes to."""
        ...


class EstimatingCounter:
    """Estimates tokens from characters (``chars_per_token``)."""

    def __init__(self, chars_per_token: float = 4.0) -> None:
        self.chars_per_token = chars_per_token

    def count(self, text: str) -> int:
        """Estimated tokens of ``text``."""
        return -(-len(text) // int(self.chars_per_token)) if text else 0


class MessageCounter:
    """Counts messages: content tokens plus per-message overhead, cached per message fingerprint."""

    def __init__(self, counter: TokenCounter, *, per_message: int = 4) -> None:
        self.counter = counter
        self.per_message = per_message
        self._cache: dict[str, int] = {}

    def count_message(self, message: Message) -> int:
        """Tokens of one message, including its overhead."""
        key = message.fingerprint()
        n = self._cache.get(key)
        if n is None:
            n = self.per_message + self.counter.count(message.text)
            for call in message.tool_calls:
                n += self.counter.count(call.name) + self.counter.count(call.arguments)
            self._cache[key] = n
        return n

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Tokens of a message list."""
        return sum(self.count_message(m) for m in messages)

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of tool schemas sent with the request."""
        import json

        return sum(self.counter.count(json.dumps(t)) for t in tools)
