"""Chat provider through LiteLLM, for the hundred providers it speaks (``contextfold[litellm]``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.util import find_spec
from typing import Any

from ..errors import MissingExtra
from ..summarize.provider import ChatMessage, Completion
from .base import overflow_from_message

__all__ = ["LiteLLMProvider"]


def _require_sdk() -> None:
    # Checked when the provider is built, without importing the SDK, so a missing extra fails at configuration.
    if find_spec("litellm") is None:
        raise MissingExtra("the LiteLLM provider", "litellm", module="litellm")


def _sdk() -> Any:
    # LiteLLM fetches its model price map from the internet at import unless told to use the bundled copy;
    # contextfold must work air-gapped and must not make calls the user did not ask for.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:
        raise MissingExtra("the LiteLLM provider", "litellm", module="litellm") from exc
    return litellm


class LiteLLMProvider:
    """Completions through ``litellm.completion``; ``model`` is a LiteLLM model string (``"bedrock/…"``)."""

    def __init__(self, model: str, **options: Any) -> None:
        _require_sdk()
        self.model = model
        self.name = f"litellm:{model}"
        self.options = options

    def complete(self, system: str, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float = 0.0,
                 seed: int | None = None) -> Completion:
        """One completion; context-window errors are raised as ContextOverflowError."""
        litellm = _sdk()
        try:
            response = litellm.completion(**self._args(system, messages, max_tokens, temperature, seed))
        except Exception as exc:
            raise _translate(exc, litellm, self.name) from exc
        return _from_response(response)

    async def acomplete(self, system: str, messages: Sequence[ChatMessage], *, max_tokens: int,
                        temperature: float = 0.0, seed: int | None = None) -> Completion:
        """Async :meth:`complete`."""
        litellm = _sdk()
        try:
            response = await litellm.acompletion(**self._args(system, messages, max_tokens, temperature, seed))
        except Exception as exc:
            raise _translate(exc, litellm, self.name) from exc
        return _from_response(response)

    def _args(self, system: str, messages: Sequence[ChatMessage], max_tokens: int, temperature: float,
              seed: int | None) -> dict[str, Any]:
        args: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "temperature": temperature,
                                "messages": [{"role": "system", "content": system}, *[dict(m) for m in messages]],
                                **self.options}
        if seed is not None:
            args["seed"] = seed
        return args


def _from_response(response: Any) -> Completion:
    choice = response.choices[0]
    message = choice.message
    refusal = getattr(message, "refusal", None)
    finish = "refusal" if refusal or choice.finish_reason == "content_filter" else choice.finish_reason
    usage = getattr(response, "usage", None)
    return Completion(text=message.content or "", input_tokens=getattr(usage, "prompt_tokens", None),
                      output_tokens=getattr(usage, "completion_tokens", None), finish_reason=finish,
                      refusal=refusal, model=getattr(response, "model", None))


def _translate(exc: Exception, litellm: Any, provider: str) -> Exception:
    overflow = overflow_from_message(str(exc), provider)
    if isinstance(exc, getattr(litellm, "ContextWindowExceededError", ())) and overflow is None:
        overflow = overflow_from_message(f"{exc} (context_length_exceeded)", provider)
    return overflow or exc
