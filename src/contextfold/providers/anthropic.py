"""Chat provider for Anthropic's Messages API through the official ``anthropic`` SDK (``contextfold[anthropic]``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..summarize.provider import ChatMessage, Completion
from .base import SDK, SDKProvider, overflow_as_error

__all__ = ["AnthropicProvider"]

# Anthropic stop reasons in the normalized vocabulary of Completion.finish_reason.
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
         "refusal": "refusal", "model_context_window_exceeded": "length"}


class AnthropicProvider(SDKProvider):
    """Completions from Claude models.

    Args:
        model: the model name, e.g. ``"claude-haiku-4-5"``.
        base_url: the API root without ``/v1`` (the SDK adds it), e.g. ``http://127.0.0.1:8000``.
        api_key: the key (default: ``ANTHROPIC_API_KEY`` from the environment, as the SDK reads it).
        max_retries: the SDK's own retries on 429, 529 and 5xx.
        timeout: seconds per request.
        client: an ``anthropic.Anthropic`` to use instead of building one; ``async_client`` likewise.
    """

    sdk = SDK("anthropic", "the Anthropic provider", "anthropic", "Anthropic", "AsyncAnthropic")

    def complete(self, system: str, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float = 0.0,
                 seed: int | None = None) -> Completion:
        """One completion; context-window errors are raised as ContextOverflowError with the counts.

        ``temperature`` and ``seed`` are accepted for the protocol but not sent: the current Messages API takes
        neither (its SDK dropped ``temperature``), so Claude summaries are not bit-for-bit repeatable.
        """
        with overflow_as_error(self.name):
            return _from_message(self.client.messages.create(**self._args(system, messages, max_tokens)))

    async def acomplete(self, system: str, messages: Sequence[ChatMessage], *, max_tokens: int,
                        temperature: float = 0.0, seed: int | None = None) -> Completion:
        """Async :meth:`complete`."""
        with overflow_as_error(self.name):
            return _from_message(await self.async_client.messages.create(**self._args(system, messages, max_tokens)))

    def _args(self, system: str, messages: Sequence[ChatMessage], max_tokens: int) -> dict[str, Any]:
        return {"model": self.model, "system": system, "messages": [dict(m) for m in messages],
                "max_tokens": max_tokens}


def _from_message(message: Any) -> Completion:
    text = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
    stop = message.stop_reason
    finish = _STOP.get(stop or "", stop)
    return Completion(
        text=text,
        input_tokens=getattr(message.usage, "input_tokens", None),
        output_tokens=getattr(message.usage, "output_tokens", None),
        finish_reason=finish,
        refusal=(text or "refused") if finish == "refusal" else None,
        model=getattr(message, "model", None),
    )

