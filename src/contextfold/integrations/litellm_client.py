"""``litellm.completion`` with the conversation kept in a ContextManager, and overflow recovery.

litellm maps every provider's context-length error to ``ContextWindowExceededError``; recovery recognises it (and
the provider's own wording inside it), compacts or drops the oldest turns, and retries::

    cm.add({"role": "user", "content": "fix the failing test"})
    response = completion(cm, model="anthropic/claude-sonnet-4-5", max_tokens=2_000)

Needs ``contextfold[litellm]``.

The view is sent in OpenAI Chat's shape whatever provider the model string names; litellm translates it. Anthropic
refuses tool call ids Chat takes (``functions.bash:0``, an id a later call uses again): when litellm targets Anthropic,
such ids are renamed as the native Anthropic encoder renames them (``formats/_call_ids.py``), calls and results alike.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import MissingExtra
from ..formats.openai_chat import with_anthropic_call_ids
from ..recovery import DEFAULT_MAX_RETRIES, acall_with_recovery, call_with_recovery
from ._calls import (
    MAX_RETRIEVAL_ROUNDS,
    afinish,
    check_retrieval,
    count_extras,
    finish,
    reject,
    retrieval_results,
    streaming,
    with_retrieval_tools,
)
from ._streams import AsyncManagedStream, ManagedStream, awaitable

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["acompletion", "completion"]


def _sdk() -> Any:
    try:
        import litellm
    except ImportError as exc:
        raise MissingExtra("the LiteLLM completion wrapper", "litellm", module="litellm") from exc
    return litellm


def _as_sent(view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return view


def _sender(litellm: Any, kwargs: dict[str, Any]) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """What the Chat view needs before litellm sends it to the provider the call's model names (litellm's reading)."""
    try:
        model, provider, _, _ = litellm.get_llm_provider(model=kwargs.get("model") or "",
                                                         custom_llm_provider=kwargs.get("custom_llm_provider"),
                                                         api_base=kwargs.get("api_base"))
    except Exception:  # a model litellm cannot place: the call itself raises litellm's own error for it
        return _as_sent
    return with_anthropic_call_ids if _serves_claude(str(provider), str(model)) else _as_sent


def _serves_claude(provider: str, model: str) -> bool:
    """Whether the request reaches a Claude model, whose API takes each tool call id once and of ``[A-Za-z0-9_-]``.

    Not Anthropic's own API only: Vertex AI (``vertex_ai/claude-…``) and Bedrock (``bedrock/anthropic.claude-…``)
    serve Claude through the Messages API under the same rules, and gateways forward to it
    (``openrouter/anthropic/claude-…``). The rename is harmless anywhere else (ids stay unique and paired), so the
    model family decides, not the provider's name alone.
    """
    return provider == "anthropic" or "claude" in model.lower()


def _items(response: Any) -> list[dict[str, Any]]:
    """The reply as an OpenAI Chat message (litellm's Message carries provider extras that are not history)."""
    choices = getattr(response, "choices", None) or []
    if not choices:
        return []
    message = choices[0].message
    item: dict[str, Any] = {"role": "assistant", "content": getattr(message, "content", None)}
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        item["tool_calls"] = [{"id": c.id, "type": "function",
                               "function": {"name": c.function.name, "arguments": c.function.arguments or "{}"}}
                              for c in calls]
    return [item] if item["content"] or calls else []


def _closer(events: Any) -> Any:
    """Close litellm's stream wrapper (it closes the provider's response); a no-op when it has nothing to close."""
    def close() -> None:
        response = getattr(events, "completion_stream", None)
        closing = getattr(response, "close", None)
        if callable(closing):
            closing()

    return close


def completion(cm: ContextManager, *, recovery_retries: int = DEFAULT_MAX_RETRIES, add_reply: bool = True,
               retrieval_tools: bool = False, compact_tool: bool = False, **kwargs: Any) -> Any:
    """``litellm.completion(messages=<the view>, **kwargs)``: prepare, call, recover, record usage, add the reply.

    Args:
        cm: The session's manager.
        recovery_retries: Overflow retries (litellm's own ``num_retries`` on transient errors are separate).
        add_reply: Append the model's reply to the history.
        retrieval_tools: Add the retrieval tools to ``tools=`` and answer the model's calls to them inside the call.
        compact_tool: Add ``compact_context`` (the agent compacts its own context) and answer it the same way.
        kwargs: Passed to ``litellm.completion`` (``model``, ``tools``, ``api_base``, …), except ``messages``.
    """
    litellm = _sdk()
    reject(kwargs, ("messages",), "completion")
    check_retrieval(retrieval_tools, add_reply, "completion", compact_tool)
    stream = streaming(kwargs, retrieval_tools, "completion")
    kwargs = with_retrieval_tools(cm, kwargs, "openai_chat", enabled=retrieval_tools, where="completion",
                                  compact=compact_tool)
    count_extras(cm, kwargs)
    sent = _sender(litellm, kwargs)
    if stream:
        kwargs = {"stream_options": {"include_usage": True}, **kwargs}
        events = call_with_recovery(cm, lambda view: litellm.completion(messages=sent(view), **kwargs),
                                    format="openai_chat", max_retries=recovery_retries)
        chunks: list[Any] = []
        return ManagedStream(events, collect=chunks.append, final=lambda: litellm.stream_chunk_builder(chunks),
                             close=_closer(events), done=lambda reply: finish(
                                 cm, getattr(reply, "usage", None), _items(reply), format="openai_chat",
                                 add_reply=add_reply))
    for _ in range(MAX_RETRIEVAL_ROUNDS):
        response = call_with_recovery(cm, lambda view: litellm.completion(messages=sent(view), **kwargs),
                                      format="openai_chat", max_retries=recovery_retries)
        items = _items(response)
        finish(cm, getattr(response, "usage", None), items, format="openai_chat", add_reply=add_reply)
        answers = (retrieval_results(cm, items, "openai_chat", compact_tool)
                   if retrieval_tools or compact_tool else None)
        if answers is None:
            break
        cm.add(answers, format="openai_chat")
    return response


async def acompletion(cm: ContextManager, *, recovery_retries: int = DEFAULT_MAX_RETRIES, add_reply: bool = True,
                      retrieval_tools: bool = False, compact_tool: bool = False, **kwargs: Any) -> Any:
    """Async :func:`completion` over ``litellm.acompletion``."""
    litellm = _sdk()
    reject(kwargs, ("messages",), "acompletion")
    check_retrieval(retrieval_tools, add_reply, "acompletion", compact_tool)
    stream = streaming(kwargs, retrieval_tools, "acompletion")
    kwargs = with_retrieval_tools(cm, kwargs, "openai_chat", enabled=retrieval_tools, where="acompletion",
                                  compact=compact_tool)
    count_extras(cm, kwargs)
    sent = _sender(litellm, kwargs)
    if stream:
        kwargs = {"stream_options": {"include_usage": True}, **kwargs}
        events = await acall_with_recovery(cm, lambda view: litellm.acompletion(messages=sent(view), **kwargs),
                                           format="openai_chat", max_retries=recovery_retries)
        chunks: list[Any] = []

        async def close() -> None:
            response = getattr(events, "completion_stream", None)
            closing = getattr(response, "aclose", None) or getattr(response, "close", None)
            result = closing() if callable(closing) else None
            if inspect.isawaitable(result):
                await result

        return AsyncManagedStream(events, collect=chunks.append,
                                  final=awaitable(lambda: litellm.stream_chunk_builder(chunks)), close=close,
                                  done=lambda reply: afinish(cm, getattr(reply, "usage", None), _items(reply),
                                                             format="openai_chat", add_reply=add_reply))
    for _ in range(MAX_RETRIEVAL_ROUNDS):
        response = await acall_with_recovery(cm, lambda view: litellm.acompletion(messages=sent(view), **kwargs),
                                             format="openai_chat", max_retries=recovery_retries)
        items = _items(response)
        await afinish(cm, getattr(response, "usage", None), items, format="openai_chat", add_reply=add_reply)
        answers = (retrieval_results(cm, items, "openai_chat", compact_tool)
                   if retrieval_tools or compact_tool else None)
        if answers is None:
            break
        await cm.aadd(answers, format="openai_chat")
    return response
