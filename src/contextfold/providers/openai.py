"""Chat provider for OpenAI and any OpenAI-compatible endpoint (vLLM, Ollama, LiteLLM proxy, Azure, …).

Speaks Chat Completions by default, or the Responses API with ``api="responses"``. Needs ``contextfold[openai]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ..summarize.provider import ChatMessage, Completion
from .base import SDK, SDKProvider, overflow_as_error

__all__ = ["OpenAIProvider"]

# Chat Completions' finish reasons in the normalized vocabulary of Completion.finish_reason.
_CHAT_FINISH = {"stop": "stop", "length": "length", "content_filter": "refusal", "tool_calls": "tool_calls",
                "function_call": "tool_calls"}


class OpenAIProvider(SDKProvider):
    """Completions from an OpenAI-compatible API through the official ``openai`` SDK.

    Args:
        model: the model name sent with each request.
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` for a local server (default: OpenAI's).
        api_key: the key (default: ``OPENAI_API_KEY`` from the environment, as the SDK reads it).
        api: ``"chat"`` (Chat Completions) or ``"responses"`` (Responses API).
        token_param: ``"max_tokens"`` (accepted by every compatible server) or ``"max_completion_tokens"``
            (required by OpenAI's reasoning models) for Chat Completions.
        max_retries: the SDK's own retries on 429 and 5xx.
        timeout: seconds per request.
        client: an ``openai.OpenAI`` to use instead of building one; ``async_client`` likewise.
    """

    sdk = SDK("openai", "the OpenAI provider", "openai", "OpenAI", "AsyncOpenAI")

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api: Literal["chat", "responses"] = "chat",
        token_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        max_retries: int = 2,
        timeout: float = 120.0,
        client: Any = None,
        async_client: Any = None,
    ) -> None:
        if api not in ("chat", "responses"):
            raise ValueError(f"api: expected 'chat' or 'responses', got {api!r}")
        super().__init__(model, base_url=base_url, api_key=api_key, max_retries=max_retries, timeout=timeout,
                         client=client, async_client=async_client)
        self.api = api
        self.token_param = token_param

    def complete(self, system: str, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float = 0.0,
                 seed: int | None = None) -> Completion:
        """One completion; context-window errors are raised as ContextOverflowError with the counts."""
        with overflow_as_error(self.name):
            if self.api == "responses":
                return _from_response(self.client.responses.create(**self._responses_args(system, messages,
                                                                                         max_tokens, temperature)))
            return _from_chat(self.client.chat.completions.create(**self._chat_args(system, messages, max_tokens,
                                                                                   temperature, seed)))

    async def acomplete(self, system: str, messages: Sequence[ChatMessage], *, max_tokens: int,
                        temperature: float = 0.0, seed: int | None = None) -> Completion:
        """Async :meth:`complete`."""
        client = self.async_client
        with overflow_as_error(self.name):
            if self.api == "responses":
                args = self._responses_args(system, messages, max_tokens, temperature)
                return _from_response(await client.responses.create(**args))
            args = self._chat_args(system, messages, max_tokens, temperature, seed)
            return _from_chat(await client.chat.completions.create(**args))

    def _chat_args(self, system: str, messages: Sequence[ChatMessage], max_tokens: int, temperature: float,
                   seed: int | None) -> dict[str, Any]:
        args: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, *[dict(m) for m in messages]],
            self.token_param: max_tokens,
            "temperature": temperature,
        }
        if seed is not None:
            args["seed"] = seed
        return args

    def _responses_args(self, system: str, messages: Sequence[ChatMessage], max_tokens: int,
                        temperature: float) -> dict[str, Any]:
        # The Responses API takes no seed; temperature 0 is what determinism it offers.
        return {"model": self.model, "instructions": system, "input": [dict(m) for m in messages],
                "max_output_tokens": max_tokens, "temperature": temperature, "store": False}


def _from_chat(response: Any) -> Completion:
    choice = response.choices[0]
    message = choice.message
    refusal = getattr(message, "refusal", None)
    finish = "refusal" if refusal else _CHAT_FINISH.get(choice.finish_reason or "", choice.finish_reason)
    usage = response.usage
    return Completion(
        text=message.content or "",
        input_tokens=getattr(usage, "prompt_tokens", None),
        output_tokens=getattr(usage, "completion_tokens", None),
        finish_reason=finish,
        refusal=refusal,
        model=getattr(response, "model", None),
    )


def _from_response(response: Any) -> Completion:
    texts: list[str] = []
    refusals: list[str] = []
    for item in response.output or []:
        if getattr(item, "type", None) != "message":
            continue
        for part in item.content or []:
            if part.type == "output_text":
                texts.append(part.text)
            elif part.type == "refusal":
                refusals.append(part.refusal)
    details = getattr(response, "incomplete_details", None)
    reason = getattr(details, "reason", None) if details is not None else None
    if refusals:
        finish = "refusal"
    elif reason == "max_output_tokens":
        finish = "length"
    elif reason == "content_filter":
        finish = "refusal"
    else:
        finish = "stop" if response.status == "completed" else str(response.status)
    usage = response.usage
    return Completion(
        text="".join(texts),
        input_tokens=getattr(usage, "input_tokens", None),
        output_tokens=getattr(usage, "output_tokens", None),
        finish_reason=finish,
        refusal="\n".join(refusals) or None,
        model=getattr(response, "model", None),
    )

