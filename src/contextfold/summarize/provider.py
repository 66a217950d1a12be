"""The chat model interface the LLM summarizer talks to, and what every client returns.

It lives with its consumer (:class:`~contextfold.summarize.LLMSummarizer`); the built-in clients for OpenAI,
Anthropic and LiteLLM implement it in :mod:`contextfold.providers`, and anything with a ``complete`` method works.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["ChatMessage", "ChatProvider", "Completion"]

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


