"""An ``openai`` client whose calls keep the conversation in a ContextManager, with overflow recovery.

Each call prepares the view, sends it, recovers from a context-length error (compact or drop the oldest turns, and
retry), records the usage the API reports, and appends the reply to the history::

    llm = wrap_openai(openai.OpenAI())
    cm.add({"role": "user", "content": "fix the failing test"})
    response = llm.chat(cm, model="gpt-4o", tools=tools)        # Chat Completions
    response = llm.responses(cm, model="gpt-4o")                 # Responses API

With ``Policy(compactor="provider")`` or ``"both"`` the Responses calls carry ``context_management`` (server-side
compaction at the hard threshold, ``contextfold.provider_context``) and the compaction items that come back are
boundaries of the history; Chat Completions has no such setting, and contextfold manages those calls itself.

``wrap_openai(client, retrieval_tools=True)`` adds ``tool_output_cache``, ``tool_output_cache_grep`` and
``history_search`` to ``tools=`` and answers the model's calls to them inside the wrapped call (a reply that also
calls your own tools comes back to you whole).

With ``stream=True`` the call returns a :class:`~contextfold.integrations._streams.ManagedStream`: iterate it for
the SDK's chunks (Chat) or events (Responses); when it ends, the usage is recorded and the reply added
(``stream.final`` is the assembled ChatCompletion or Response). Chat streams ask for the usage chunk
(``stream_options={"include_usage": True}``) unless you set ``stream_options`` yourself.

The tool schemas, ``instructions`` and structured-output schema you pass are counted against the window with the
view. Works with ``AsyncOpenAI`` too (``await llm.chat(...)``) and with Azure and OpenAI-compatible servers (vLLM,
llama.cpp, Ollama, OpenRouter), whose overflow errors are recognised as well. Needs ``contextfold[openai]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import MissingExtra
from ..recovery import DEFAULT_MAX_RETRIES, acall_with_recovery, call_with_recovery
from ._calls import (
    MAX_RETRIEVAL_ROUNDS,
    afinish,
    check_retrieval,
    count_extras,
    dump,
    finish,
    refused_settings,
    reject,
    retrieval_results,
    streaming,
    with_retrieval_tools,
)
from ._streams import AsyncManagedStream, ManagedStream, awaitable, chat_accumulator, responses_final

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


def _responses_call(cm: ContextManager, create: Any, kwargs: dict[str, Any], recovery_retries: int) -> Any:
    """One Responses call with the provider's context management when the policy asks for it (see the module)."""
    response, managed = _responses_open(cm, create, kwargs, recovery_retries)
    if managed:
        cm.provider_context.observe("openai_responses", response)
    return response


def _responses_open(cm: ContextManager, create: Any, kwargs: dict[str, Any],
                    recovery_retries: int) -> tuple[Any, bool]:
    """(what ``create`` returned, whether the provider's context management was on): a Response or a stream."""
    settings = cm.provider_context.settings("openai_responses")
    if settings is None:
        return call_with_recovery(cm, lambda view: create(input=view, **kwargs), format="openai_responses",
                                  max_retries=recovery_retries), False
    managed = settings.apply(kwargs)
    try:
        return call_with_recovery(cm, lambda view: create(input=view, **managed), format="openai_responses",
                                  max_retries=recovery_retries), True
    except Exception as exc:
        if not refused_settings(exc):
            raise
        cm.provider_context.unavailable("openai_responses", str(exc))
        return call_with_recovery(cm, lambda view: create(input=view, **kwargs), format="openai_responses",
                                  max_retries=recovery_retries), False


async def _aresponses_call(cm: ContextManager, create: Any, kwargs: dict[str, Any], recovery_retries: int) -> Any:
    """Async :func:`_responses_call`."""
    response, managed = await _aresponses_open(cm, create, kwargs, recovery_retries)
    if managed:
        cm.provider_context.observe("openai_responses", response)
    return response


async def _aresponses_open(cm: ContextManager, create: Any, kwargs: dict[str, Any],
                           recovery_retries: int) -> tuple[Any, bool]:
    """Async :func:`_responses_open`."""
    settings = cm.provider_context.settings("openai_responses")
    if settings is None:
        return await acall_with_recovery(cm, lambda view: create(input=view, **kwargs), format="openai_responses",
                                         max_retries=recovery_retries), False
    managed = settings.apply(kwargs)
    try:
        return await acall_with_recovery(cm, lambda view: create(input=view, **managed),
                                         format="openai_responses", max_retries=recovery_retries), True
    except Exception as exc:
        if not refused_settings(exc):
            raise
        cm.provider_context.unavailable("openai_responses", str(exc))
        return await acall_with_recovery(cm, lambda view: create(input=view, **kwargs), format="openai_responses",
                                         max_retries=recovery_retries), False


class OpenAIClient:
    """Chat Completions and Responses calls through ``openai.OpenAI`` (or a compatible client), managed by ``cm``.

    Args:
        client: The SDK client; None builds ``openai.OpenAI(**client_options)``.
        recovery_retries: Overflow retries per call (the SDK's own retries on 429/5xx are separate).
        add_reply: Append the model's reply to the history after each call.
        retrieval_tools: Give the model the retrieval tools and answer its calls to them inside the call.
        compact_tool: Give the model ``compact_context`` (it compacts its own context) and answer it the same way.
        client_options: Passed to ``openai.OpenAI`` when ``client`` is None.
    """

    def __init__(self, client: Any = None, *, recovery_retries: int = DEFAULT_MAX_RETRIES, add_reply: bool = True,
                 retrieval_tools: bool = False, compact_tool: bool = False, **client_options: Any) -> None:
        check_retrieval(retrieval_tools, add_reply, "OpenAIClient", compact_tool)
        self.client = client if client is not None else _sdk().OpenAI(**client_options)
        self.recovery_retries = recovery_retries
        self.add_reply = add_reply
        self.retrieval_tools = retrieval_tools
        self.compact_tool = compact_tool

    def chat(self, cm: ContextManager, **kwargs: Any) -> Any:
        """``client.chat.completions.create(messages=<the view>, **kwargs)``; returns the SDK's ChatCompletion."""
        reject(kwargs, ("messages",), "chat")
        stream = streaming(kwargs, self.retrieval_tools, "chat")
        kwargs = with_retrieval_tools(cm, kwargs, "openai_chat", enabled=self.retrieval_tools, where="chat",
                                      compact=self.compact_tool)
        count_extras(cm, kwargs)
        create = self.client.chat.completions.create
        if stream:
            kwargs = {"stream_options": {"include_usage": True}, **kwargs}
            events = call_with_recovery(cm, lambda view: create(messages=view, **kwargs), format="openai_chat",
                                        max_retries=self.recovery_retries)
            collect, final = chat_accumulator()
            return ManagedStream(events, collect=collect, final=final, close=events.close, done=lambda reply: finish(
                cm, getattr(reply, "usage", None), _chat_items(reply), format="openai_chat", add_reply=self.add_reply))
        for _ in range(MAX_RETRIEVAL_ROUNDS):
            cm.provider_context.settings("openai_chat")  # none: contextfold manages Chat Completions calls
            response = call_with_recovery(cm, lambda view: create(messages=view, **kwargs), format="openai_chat",
                                          max_retries=self.recovery_retries)
            items = _chat_items(response)
            finish(cm, getattr(response, "usage", None), items, format="openai_chat", add_reply=self.add_reply)
            answers = (retrieval_results(cm, items, "openai_chat", self.compact_tool)
                       if self.retrieval_tools or self.compact_tool else None)
            if answers is None:
                break
            cm.add(answers, format="openai_chat")
        return response

    def responses(self, cm: ContextManager, **kwargs: Any) -> Any:
        """``client.responses.create(input=<the view>, **kwargs)``; returns the SDK's Response."""
        reject(kwargs, ("input", "previous_response_id"), "responses")
        stream = streaming(kwargs, self.retrieval_tools, "responses")
        kwargs = with_retrieval_tools(cm, kwargs, "openai_responses", enabled=self.retrieval_tools,
                                      where="responses", compact=self.compact_tool)
        count_extras(cm, kwargs)
        create = self.client.responses.create
        if stream:
            events, managed = _responses_open(cm, create, kwargs, self.recovery_retries)
            collect, final = responses_final()

            def done(reply: Any) -> None:
                if managed:
                    cm.provider_context.observe("openai_responses", reply)
                finish(cm, getattr(reply, "usage", None), _responses_items(reply), format="openai_responses",
                       add_reply=self.add_reply)

            return ManagedStream(events, collect=collect, final=final, close=events.close, done=done)
        for _ in range(MAX_RETRIEVAL_ROUNDS):
            response = _responses_call(cm, create, kwargs, self.recovery_retries)
            items = _responses_items(response)
            finish(cm, getattr(response, "usage", None), items, format="openai_responses", add_reply=self.add_reply)
            answers = (retrieval_results(cm, items, "openai_responses", self.compact_tool)
                       if self.retrieval_tools or self.compact_tool else None)
            if answers is None:
                break
            cm.add(answers, format="openai_responses")
        return response


class AsyncOpenAIClient:
    """The async twin of :class:`OpenAIClient`, over ``openai.AsyncOpenAI``."""

    def __init__(self, client: Any = None, *, recovery_retries: int = DEFAULT_MAX_RETRIES, add_reply: bool = True,
                 retrieval_tools: bool = False, compact_tool: bool = False, **client_options: Any) -> None:
        check_retrieval(retrieval_tools, add_reply, "AsyncOpenAIClient", compact_tool)
        self.client = client if client is not None else _sdk().AsyncOpenAI(**client_options)
        self.recovery_retries = recovery_retries
        self.add_reply = add_reply
        self.retrieval_tools = retrieval_tools
        self.compact_tool = compact_tool

    async def chat(self, cm: ContextManager, **kwargs: Any) -> Any:
        """Async :meth:`OpenAIClient.chat`."""
        reject(kwargs, ("messages",), "chat")
        stream = streaming(kwargs, self.retrieval_tools, "chat")
        kwargs = with_retrieval_tools(cm, kwargs, "openai_chat", enabled=self.retrieval_tools, where="chat",
                                      compact=self.compact_tool)
        count_extras(cm, kwargs)
        create = self.client.chat.completions.create
        if stream:
            kwargs = {"stream_options": {"include_usage": True}, **kwargs}
            events = await acall_with_recovery(cm, lambda view: create(messages=view, **kwargs),
                                               format="openai_chat", max_retries=self.recovery_retries)
            collect, final = chat_accumulator()
            return AsyncManagedStream(events, collect=collect, final=awaitable(final), close=events.close,
                                      done=lambda reply: afinish(cm, getattr(reply, "usage", None),
                                                                 _chat_items(reply), format="openai_chat",
                                                                 add_reply=self.add_reply))
        for _ in range(MAX_RETRIEVAL_ROUNDS):
            cm.provider_context.settings("openai_chat")  # none: contextfold manages Chat Completions calls
            response = await acall_with_recovery(cm, lambda view: create(messages=view, **kwargs),
                                                 format="openai_chat", max_retries=self.recovery_retries)
            items = _chat_items(response)
            await afinish(cm, getattr(response, "usage", None), items, format="openai_chat",
                          add_reply=self.add_reply)
            answers = (retrieval_results(cm, items, "openai_chat", self.compact_tool)
                       if self.retrieval_tools or self.compact_tool else None)
            if answers is None:
                break
            await cm.aadd(answers, format="openai_chat")
        return response

    async def responses(self, cm: ContextManager, **kwargs: Any) -> Any:
        """Async :meth:`OpenAIClient.responses`."""
        reject(kwargs, ("input", "previous_response_id"), "responses")
        stream = streaming(kwargs, self.retrieval_tools, "responses")
        kwargs = with_retrieval_tools(cm, kwargs, "openai_responses", enabled=self.retrieval_tools,
                                      where="responses", compact=self.compact_tool)
        count_extras(cm, kwargs)
        create = self.client.responses.create
        if stream:
            events, managed = await _aresponses_open(cm, create, kwargs, self.recovery_retries)
            collect, final = responses_final()

            async def done(reply: Any) -> None:
                if managed:
                    cm.provider_context.observe("openai_responses", reply)
                await afinish(cm, getattr(reply, "usage", None), _responses_items(reply), format="openai_responses",
                              add_reply=self.add_reply)

            return AsyncManagedStream(events, collect=collect, final=awaitable(final), close=events.close, done=done)
        for _ in range(MAX_RETRIEVAL_ROUNDS):
            response = await _aresponses_call(cm, create, kwargs, self.recovery_retries)
            items = _responses_items(response)
            await afinish(cm, getattr(response, "usage", None), items, format="openai_responses",
                          add_reply=self.add_reply)
            answers = (retrieval_results(cm, items, "openai_responses", self.compact_tool)
                       if self.retrieval_tools or self.compact_tool else None)
            if answers is None:
                break
            await cm.aadd(answers, format="openai_responses")
        return response


def wrap_openai(client: Any, *, recovery_retries: int = DEFAULT_MAX_RETRIES, add_reply: bool = True,
                retrieval_tools: bool = False, compact_tool: bool = False) -> OpenAIClient | AsyncOpenAIClient:
    """Wrap an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (Azure's included) in the matching wrapper."""
    _sdk()
    # AsyncOpenAI and AsyncAzureOpenAI; compatible clients of other packages follow the same naming.
    if type(client).__name__.startswith("Async"):
        return AsyncOpenAIClient(client, recovery_retries=recovery_retries, add_reply=add_reply,
                                 retrieval_tools=retrieval_tools, compact_tool=compact_tool)
    return OpenAIClient(client, recovery_retries=recovery_retries, add_reply=add_reply,
                        retrieval_tools=retrieval_tools, compact_tool=compact_tool)
