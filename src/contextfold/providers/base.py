"""The chat provider interface the LLM summarizer talks to, and what every client returns."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import ContextOverflowError

__all__ = ["ChatMessage", "ChatProvider", "Completion", "parse_overflow"]

# One turn sent to a provider: {"role": "user" | "assistant", "content": "..."}. The summarizer only sends text.
ChatMessage = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Completion:
    """A provider's reply, reduced to what a summarizer needs.

    ``finish_reason`` is normalized across providers: ``"stop"``, ``"length"`` (cut at ``max_tokens``),
    ``"refusal"``, ``"tool_calls"``, or the provider's own word for anything else. ``refusal`` holds the refusal
    text when the model declined.
    """

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    refusal: str | None = None
    model: str | None = None


@runtime_checkable
class ChatProvider(Protocol):
    """A chat model behind one method. Built-ins: ``get_provider("openai:gpt-4o-mini")`` and friends.

    Example:
        >>> class Echo:
        ...     def complete(self, system, messages, *, max_tokens, temperature=0.0, seed=None):
        ...         return Completion(messages[-1]["content"][:max_tokens], finish_reason="stop")
    """

    def complete(
        self,
        system: str,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> Completion:
        """Send ``system`` and ``messages``; return the reply. Raises the SDK's errors, or ContextOverflowError."""
        ...


# Context-window errors, with the counts they carry: (pattern, group of the prompt size, group of the limit).
_OVERFLOW_PATTERNS: tuple[tuple[re.Pattern[str], int | None, int | None], ...] = (
    (re.compile(r"maximum context length is (\d+) tokens\. However, (?:your messages resulted in|you requested) "
                r"(\d+) tokens"), 2, 1),
    (re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum"), 1, 2),
    (re.compile(r"input length and `max_tokens` exceed context limit: (\d+) \+ \d+ > (\d+)"), 1, 2),
    (re.compile(r"Your input exceeds the context window of this model"), None, None),
    (re.compile(r"context_length_exceeded"), None, None),
)


def parse_overflow(message: str, provider: str | None = None) -> ContextOverflowError | None:
    """A :class:`ContextOverflowError` when ``message`` is a context-window error, with the counts it names."""
    for pattern, prompt_group, limit_group in _OVERFLOW_PATTERNS:
        match = pattern.search(message)
        if match:
            prompt = int(match.group(prompt_group)) if prompt_group else None
            limit = int(match.group(limit_group)) if limit_group else None
            return ContextOverflowError(message, prompt_tokens=prompt, limit=limit, provider=provider)
    return None
