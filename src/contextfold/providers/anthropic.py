"""Chat provider for Anthropic's Messages API through the official ``anthropic`` SDK (``contextfold[anthropic]``)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.util import find_spec
from typing import Any

from ..errors import MissingExtra
from .base import ChatMessage, Completion, parse_overflow

__all__ = ["AnthropicProvider"]

# Anthropic stop reasons in the normalized vocabulary of Completion.finish_reason.
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
         "refusal": "refusal", "model_context_window_exceeded": "length"}


def _require_sdk() -> None:
    # Checked when the provider is built, without importing the SDK, so a missing extra fails at configuration.
    if find_spec("anthropic") is None:
        raise MissingExtra("the Anthropic provider", "anthropic", module="anthropic")


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingExtra("the Anthropic provider", "anthropic", module="anthropic") from exc
    return anthropic


class AnthropicProvider:
    """Completions from Claude models.

    Args:
        model: the model name, e.g. ``"claude-haiku-4-5"``.
        base_url: the API root without ``/v1`` (the SDK adds it), e.g. ``http://127.0.0.1:8000``.
        api_key: the key (default: ``ANTHROPIC_API_KEY`` from the environment, as the SDK reads it).
        max_retries: the SDK's own retries on 429, 529 and 5xx.
        timeout: seconds per request.
        client: an ``anthropic.Anthropic`` to use instead of building one; ``async_client`` likewise.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None, max_retries: int = 2,
                 timeout: float = 120.0, client: Any = None, async_client: Any = None) -> None:
        if client is None or async_client is None:
            _require_sdk()
        self.model = model
        self.name = f"anthropic:{model}"
        self._options: dict[str, Any] = {"base_url": base_url, "api_key": api_key, "max_retries": max_retries,
                                         "timeout": timeout}
        self._client = client
        self._async_client = async_client

    @property
    def client(self) -> Any:
        """The sync SDK client (built on first use)."""
        if self._client is None:
            self._client = _sdk().Anthropic(**self._options)
        return self._client

    @property
    def async_client(self) -> Any:
        """The async SDK client (built on first use)."""
        if self._async_client is None:
            self._async_client = _sdk().AsyncAnthropic(**self._options)
        return self._async_client

    def complete(self, system: str, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float = 0.0,
                 seed: int | None = None) -> Completion:
        """One completion; context-window errors are raised as ContextOverflowError with the counts.

        ``temperature`` and ``seed`` are accepted for the protocol but not sent: the current Messages API takes
        neither (its SDK dropped ``temperature``), so Claude summaries are not bit-for-bit repeatable.
        """
        try:
            return _from_message(self.client.messages.create(**self._args(system, messages, max_tokens,
                                                                          temperature)))
        except Exception as exc:
            raise _translate(exc, self.name) from exc

    async def acomplete(self, system: str, messages: Sequence[ChatMessage], *, max_tokens: int,
                        temperature: float = 0.0, seed: int | None = None) -> Completion:
        """Async :meth:`complete`."""
        try:
            args = self._args(system, messages, max_tokens, temperature)
            return _from_message(await self.async_client.messages.create(**args))
        except Exception as exc:
            raise _translate(exc, self.name) from exc

    def _args(self, system: str, messages: Sequence[ChatMessage], max_tokens: int,
              temperature: float) -> dict[str, Any]:
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


def _translate(exc: Exception, provider: str) -> Exception:
    """Context-window errors become ContextOverflowError; every other error passes through unchanged."""
    if getattr(exc, "status_code", None) != 400:
        return exc
    return parse_overflow(str(getattr(exc, "message", "") or exc), provider) or exc
