"""An ``openai`` client whose calls keep the conversation in a ContextManager, with overflow recovery.

Each call prepares the view, sends it, recovers from a context-length error (compact or drop the oldest turns, and
retry), records the usage the API reports, and appends the reply to the history::

    llm = wrap_openai(openai.OpenAI())
    cm.add({"role": "user", "content": "fix the failing test"})
    response = llm.chat(cm, model="gpt-4o", tools=tools)        # Chat Completions
    response = llm.responses(cm, model="gpt-4o")                 # Responses API

Works with ``AsyncOpenAI`` too (``await llm.chat(...)``) and with Azure and OpenAI-compatible servers (vLLM,
llama.cpp, Ollama, OpenRouter), whose overflow errors are recognised as well. Needs ``contextfold[openai]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import MissingExtra
from ..recovery import DEFAULT_MAX_RETRIES, acall_with_recovery, call_with_recovery
from ._calls import afinish, dump, finish, reject

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["AsyncOpenAIClient", "OpenAIClient", "wrap_openai"]


def _sdk() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise MissingExtra("the OpenAI client wrapper", "openai", module="openai") from exc
    return openai


def _chat_items(response: Any) -> list[dict[str, Any]]:
    choices = getattr(response, "choices", None) or []
    return [dump(choices[0].message)] if choices else []


def _responses_items(response: Any) -> list[dict[str, Any]]:
    return [dump(item) for item in getattr(response, "output", None) or []]


class OpenAIClient:
    """Chat Completions and Responses calls through ``openai.OpenAI`` (or a compatible client), managed by ``cm``.

    Args:
        client: The SDK client; None builds ``openai.OpenAI(**client_options)``.
        recovery_retries: Overflow retries per call (the SDK's own retries on 429/5xx are separate).
        add_reply: Append the model's reply to the history after each call.
        client_options: Passed to ``openai.OpenAI`` when ``client`` is None.
    """

    def __init__(self, client: Any = None, *, recovery_retries: int = DEFAULT_MAX_RETRIES, add_reply: bool = True,
                 **client_options: Any) -> None:
        self.client = client if client is not None else _sdk().OpenAI(**client_options)
        self.recovery_retries = recovery_retries
        self.add_reply = add_reply

    def chat(self, cm: ContextManager, **kwargs: Any) -> Any:
        """``client.chat.completions.create(messages=<the view>, **kwargs)``; returns the SDK's ChatCompletion."""
        reject(kwargs, ("messages",), "chat")
        create = self.client.chat.completions.create
        response = call_with_recovery(cm, lambda view: create(messages=view, **kwargs), format="openai_chat",
                                      max_retries=self.recovery_retries)
        finish(cm, getattr(response, "usage", None), _chat_items(response), format="openai_chat",
               add_reply=self.add_reply)
        return response

    def responses(self, cm: ContextManager, **kwargs: Any) -> Any:
        """``client.responses.create(input=<the view>, **kwargs)``; returns the SDK's Response."""
        reject(kwargs, ("input", "previous_response_id"), "responses")
        create = self.client.responses.create
        response = call_with_recovery(cm, lambda view: create(input=view, **kwargs), format="openai_responses",
                                      max_retries=self.recovery_retries)
        finish(cm, getattr(response, "usage", None), _responses_items(response), format="openai_responses",
               add_reply=self.add_reply)
        return response


class AsyncOpenAIClient:
    """The async twin of :class:`OpenAIClient`, over ``openai.AsyncOpenAI``."""

    def __init__(self, client: Any = None, *, recovery_retries: int = DEFAULT_MAX_RETRIES, add_reply: bool = True,
                 **client_options: Any) -> None:
        self.client = client if client is not None else _sdk().AsyncOpenAI(**client_options)
        self.recovery_retries = recovery_retries
        self.add_reply = add_reply

    async def chat(self, cm: ContextManager, **kwargs: Any) -> Any:
        """Async :meth:`OpenAIClient.chat`."""
        reject(kwargs, ("messages",), "chat")
        create = self.client.chat.completions.create
        response = await acall_with_recovery(cm, lambda view: create(messages=view, **kwargs), format="openai_chat",
                                             max_retries=self.recovery_retries)
        await afinish(cm, getattr(response, "usage", None), _chat_items(response), format="openai_chat",
                      add_reply=self.add_reply)
        return response

    async def responses(self, cm: ContextManager, **kwargs: Any) -> Any:
        """Async :meth:`OpenAIClient.responses`."""
        reject(kwargs, ("input", "previous_response_id"), "responses")
        create = self.client.responses.create
        response = await acall_with_recovery(cm, lambda view: create(input=view, **kwargs),
                                             format="openai_responses", max_retries=self.recovery_retries)
        await afinish(cm, getattr(response, "usage", None), _responses_items(response), format="openai_responses",
                      add_reply=self.add_reply)
        return response


def wrap_openai(client: Any, *, recovery_retries: int = DEFAULT_MAX_RETRIES,
                add_reply: bool = True) -> OpenAIClient | AsyncOpenAIClient:
    """Wrap an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (Azure's included) in the matching wrapper."""
    _sdk()
    # AsyncOpenAI and AsyncAzureOpenAI; compatible clients of other packages follow the same naming.
    if type(client).__name__.startswith("Async"):
        return AsyncOpenAIClient(client, recovery_retries=recovery_retries, add_reply=add_reply)
    return OpenAIClient(client, recovery_retries=recovery_retries, add_reply=add_reply)
