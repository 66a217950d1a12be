"""An ``anthropic`` client whose ``messages.create`` keeps the conversation in a ContextManager, with recovery.

Each call prepares the view (system prompt apart, as the Messages API takes it), sends it, recovers from "prompt is
too long" (compact or drop the oldest turns, and retry), records the usage, and appends the reply::

    llm = wrap_anthropic(anthropic.Anthropic())
    cm.add({"role": "user", "content": "fix the failing test"})
    message = llm.messages(cm, model="claude-sonnet-4-5", max_tokens=2_000, tools=tools)

``AsyncAnthropic`` works the same way (``await llm.messages(...)``). Needs ``contextfold[anthropic]``.

With ``Policy(compactor="provider")`` or ``"both"`` each call goes through ``client.beta.messages.create`` with
``context_management`` (clearing old tool results and thinking, and server-side compaction, sized from the policy:
``contextfold.provider_context``) and the betas it needs; what the provider cleared and compacted is read from the
reply. A history holding a compaction block always gets the compaction beta, which the provider requires.

Prompt caching: unless the caller placed ``cache_control`` anywhere (top level, tools, system, a message), each
request carries contextfold's breakpoints (``cache_breakpoints=False`` turns them off): after the pinned head (the
system prompt, or the last tool without one), after what the next masking batch keeps (the latest summary and the
outputs masked before, up to the turn of the first output not masked yet), 15 blocks before the end (a turn of
many parallel tool calls leaves the previous request in reach), and on the last history message, before the budget
line (``contextfold.billing.breakpoints``). The replay bills these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, MissingExtra
from ..formats._anthropic_marks import keep_latest_marks
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
from ._streams import AsyncManagedStream, ManagedStream, anthropic_final

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..provider_context import RequestSettings

__all__ = ["AnthropicClient", "AsyncAnthropicClient", "wrap_anthropic"]


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingExtra("the Anthropic client wrapper", "anthropic", module="anthropic") from exc
    return anthropic


def _request(view: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of one call: the prepared view merged with the caller's.

    A system prompt given twice is refused rather than one of them silently dropped.
    """
    request = {k: v for k, v in view.items() if v is not None}
    if "system" in kwargs and "system" in request:
        raise ConfigError("given as a keyword while the ContextManager holds a system message; keep one of them",
                          field="messages.system")
    return {**kwargs, **request}


def _reply_tokens(kwargs: dict[str, Any]) -> int:
    # Anthropic rejects input + max_tokens over the window: a retry must leave the reply its room.
    value = kwargs.get("max_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _items(message: Any) -> list[dict[str, Any]]:
    content = [dump(block) for block in getattr(message, "content", None) or []]
    return [{"role": "assistant", "content": content}] if content else []


# Anthropic refuses a request carrying more cache_control marks than this.
_MAX_MARKS = 4


def _holds_compaction(view: dict[str, Any]) -> bool:
    return any(isinstance(block, dict) and block.get("type") == "compaction"
               for message in view.get("messages") or () for block in message.get("content") or ()
               if isinstance(message.get("content"), list))


def _caller_caches(kwargs: dict[str, Any]) -> bool:
    """Whether the caller placed its own ``cache_control`` (top level, on a tool or in the system prompt)."""
    if "cache_control" in kwargs:
        return True
    system = kwargs.get("system")
    blocks = [*(kwargs.get("tools") or ()), *(system if isinstance(system, list) else ())]
    return any(isinstance(b, dict) and "cache_control" in b for b in blocks)


def _ours_to_mark(cm: ContextManager, kwargs: dict[str, Any]) -> bool:
    """Whether contextfold places the breakpoints: not when the caller placed any, in the call or in the history."""
    from ..billing.breakpoints import carries_marks

    return not _caller_caches(kwargs) and not carries_marks(cm.messages())


def _marks_in(messages: Any) -> int:
    """``cache_control`` marks on the content blocks of wire messages."""
    return sum(1 for message in messages or () if isinstance(message, dict) and isinstance(message.get("content"), list)
               for block in message["content"] if isinstance(block, dict) and "cache_control" in block)


def _mark_head(request: dict[str, Any]) -> dict[str, Any]:
    """A breakpoint on the system prompt's last block (or the last tool, without one) when the view had none.

    The Messages API renders tools, then system, then messages: this prefix survives every rewrite of the history.
    Never a fifth mark: Anthropic refuses a request with more than 4.
    """
    from ..billing.breakpoints import EPHEMERAL

    if _marks_in(request.get("messages")) >= _MAX_MARKS:
        return request

    system = request.get("system")
    if isinstance(system, str) and system:
        return {**request, "system": [{"type": "text", "text": system, "cache_control": dict(EPHEMERAL)}]}
    if isinstance(system, list) and system:
        last = system[-1]
        if isinstance(last, dict) and "cache_control" not in last:
            return {**request, "system": [*system[:-1], {**last, "cache_control": dict(EPHEMERAL)}]}
        return request
    tools = request.get("tools")
    if not system and isinstance(tools, list) and tools and isinstance(tools[-1], dict):
        return {**request, "tools": [*tools[:-1], {**tools[-1], "cache_control": dict(EPHEMERAL)}]}
    return request


def _managed_request(view: dict[str, Any], kwargs: dict[str, Any], settings: RequestSettings | None, *,
                     breakpoints: bool = False) -> dict[str, Any]:
    """One request's keyword arguments: the view, the caller's, the provider's context management and its betas."""
    from ..provider_context import ANTHROPIC_COMPACT_BETA

    request = _request(view, kwargs)
    if breakpoints:
        request = _mark_head(request)
    request = keep_latest_marks(request)  # (the caller's marks on tools and system count against Anthropic's 4)
    if settings is not None:
        request = settings.apply(request)
    if _holds_compaction(view) and ANTHROPIC_COMPACT_BETA not in (request.get("betas") or ()):
        request["betas"] = [*(request.get("betas") or ()), ANTHROPIC_COMPACT_BETA]
    return request


def _create(client: Any, view: dict[str, Any], kwargs: dict[str, Any], settings: RequestSettings | None, *,
            breakpoints: bool = False) -> Any:
    """``messages.create`` of one request, or the beta endpoint when context management or its blocks need it."""
    request = _managed_request(view, kwargs, settings, breakpoints=breakpoints)
    if request.get("betas"):
        return client.beta.messages.create(**request)
    return client.messages.create(**request)


def _stream_manager(client: Any, view: dict[str, Any], kwargs: dict[str, Any],
                    settings: RequestSettings | None, *, breakpoints: bool = False) -> Any:
    """The SDK's ``messages.stream`` manager of one request (the beta one when :func:`_create` would use it)."""
    request = _managed_request(view, {k: v for k, v in kwargs.items() if k != "stream"}, settings,
                               breakpoints=breakpoints)
    if request.get("betas"):
        return client.beta.messages.stream(**request)
    return client.messages.stream(**request)


def _settings(cm: ContextManager, kwargs: dict[str, Any]) -> RequestSettings | None:
    from ..provider_context import thinking_enabled

    return cm.provider_context.settings("anthropic", thinking=thinking_enabled(kwargs.get("thinking")))


class AnthropicClient:
    """``messages.create`` through ``anthropic.Anthropic``, managed by ``cm``.

    Args:
        client: The SDK client; None builds ``anthropic.Anthropic(**client_options)``.
        recovery_retries: Overflow retries per call (the SDK's own retries on 429/5xx are separate).
        add_reply: Append the model's reply to the history after each call.
        retrieval_tools: Give the model the retrieval tools and answer its calls to them inside the call.
        compact_tool: Give the model ``compact_context`` (it compacts its own context) and answer it the same way.
        cache_breakpoints: Place contextfold's prompt-cache breakpoints (see the module) unless the call has its own.
        client_options: Passed to ``anthropic.Anthropic`` when ``client`` is None.
    """

    def __init__(self, client: Any = None, *, recovery_retries: int = DEFAULT_MAX_RETRIES, add_reply: bool = True,
                 retrieval_tools: bool = False, compact_tool: bool = False, cache_breakpoints: bool = True,
                 **client_options: Any) -> None:
        check_retrieval(retrieval_tools, add_reply, "AnthropicClient", compact_tool)
        self.client = client if client is not None else _sdk().Anthropic(**client_options)
        self.recovery_retries = recovery_retries
        self.add_reply = add_reply
        self.retrieval_tools = retrieval_tools
        self.compact_tool = compact_tool
        self.cache_breakpoints = cache_breakpoints

    def messages(self, cm: ContextManager, **kwargs: Any) -> Any:
        """``client.messages.create(system=…, messages=<the view>, **kwargs)``; returns the SDK's Message."""
        reject(kwargs, ("messages",), "messages")
        stream = streaming(kwargs, self.retrieval_tools, "messages")
        kwargs = with_retrieval_tools(cm, kwargs, "anthropic", enabled=self.retrieval_tools, where="messages",
                                      compact=self.compact_tool)
        count_extras(cm, kwargs)
        if stream:
            return self._stream(cm, kwargs)
        for _ in range(MAX_RETRIEVAL_ROUNDS):
            reply = self._call(cm, kwargs)
            items = _items(reply)
            finish(cm, getattr(reply, "usage", None), items, format="anthropic", add_reply=self.add_reply)
            answers = (retrieval_results(cm, items, "anthropic", self.compact_tool)
                       if self.retrieval_tools or self.compact_tool else None)
            if answers is None:
                break
            cm.add(answers, format="anthropic")
        return reply

    def _call(self, cm: ContextManager, kwargs: dict[str, Any]) -> Any:
        settings = _settings(cm, kwargs)
        marks = self.cache_breakpoints and _ours_to_mark(cm, kwargs)
        try:
            reply = call_with_recovery(cm, lambda view: _create(self.client, view, kwargs, settings, breakpoints=marks),
                                       format="anthropic", max_retries=self.recovery_retries,
                                       reply_tokens=_reply_tokens(kwargs), cache_breakpoints=marks)
        except Exception as exc:
            if settings is None or not refused_settings(exc):
                raise
            cm.provider_context.unavailable("anthropic", str(exc))
            return call_with_recovery(cm, lambda view: _create(self.client, view, kwargs, None, breakpoints=marks),
                                      format="anthropic", max_retries=self.recovery_retries,
                                      reply_tokens=_reply_tokens(kwargs), cache_breakpoints=marks)
        if settings is not None:
            cm.provider_context.observe("anthropic", reply)
        return reply

    def _stream(self, cm: ContextManager, kwargs: dict[str, Any]) -> ManagedStream:
        """The stream opened inside the recovery loop (the provider refuses an overflow before the first event)."""
        settings = _settings(cm, kwargs)
        marks = self.cache_breakpoints and _ours_to_mark(cm, kwargs)
        opened = call_with_recovery(
            cm, lambda view: _stream_manager(self.client, view, kwargs, settings, breakpoints=marks).__enter__(),
            format="anthropic", max_retries=self.recovery_retries, reply_tokens=_reply_tokens(kwargs),
            cache_breakpoints=marks)

        def done(reply: Any) -> None:
            if settings is not None:
                cm.provider_context.observe("anthropic", reply)
            finish(cm, getattr(reply, "usage", None), _items(reply), format="anthropic", add_reply=self.add_reply)

        collect, final = anthropic_final(opened)
        return ManagedStream(opened, collect=collect, final=final, close=opened.close, done=done)


class AsyncAnthropicClient:
    """The async twin of :class:`AnthropicClient`, over ``anthropic.AsyncAnthropic``."""

    def __init__(self, client: Any = None, *, recovery_retries: int = DEFAULT_MAX_RETRIES, add_reply: bool = True,
                 retrieval_tools: bool = False, compact_tool: bool = False, cache_breakpoints: bool = True,
                 **client_options: Any) -> None:
        check_retrieval(retrieval_tools, add_reply, "AsyncAnthropicClient", compact_tool)
        self.client = client if client is not None else _sdk().AsyncAnthropic(**client_options)
        self.recovery_retries = recovery_retries
        self.add_reply = add_reply
        self.retrieval_tools = retrieval_tools
        self.compact_tool = compact_tool
        self.cache_breakpoints = cache_breakpoints

    async def messages(self, cm: ContextManager, **kwargs: Any) -> Any:
        """Async :meth:`AnthropicClient.messages`."""
        reject(kwargs, ("messages",), "messages")
        stream = streaming(kwargs, self.retrieval_tools, "messages")
        kwargs = with_retrieval_tools(cm, kwargs, "anthropic", enabled=self.retrieval_tools, where="messages",
                                      compact=self.compact_tool)
        count_extras(cm, kwargs)
        if stream:
            return await self._stream(cm, kwargs)
        for _ in range(MAX_RETRIEVAL_ROUNDS):
            reply = await self._call(cm, kwargs)
            items = _items(reply)
            await afinish(cm, getattr(reply, "usage", None), items, format="anthropic", add_reply=self.add_reply)
            answers = (retrieval_results(cm, items, "anthropic", self.compact_tool)
                       if self.retrieval_tools or self.compact_tool else None)
            if answers is None:
                break
            await cm.aadd(answers, format="anthropic")
        return reply

    async def _call(self, cm: ContextManager, kwargs: dict[str, Any]) -> Any:
        settings = _settings(cm, kwargs)
        marks = self.cache_breakpoints and _ours_to_mark(cm, kwargs)
        try:
            reply = await acall_with_recovery(
                cm, lambda view: _create(self.client, view, kwargs, settings, breakpoints=marks), format="anthropic",
                max_retries=self.recovery_retries, reply_tokens=_reply_tokens(kwargs), cache_breakpoints=marks)
        except Exception as exc:
            if settings is None or not refused_settings(exc):
                raise
            cm.provider_context.unavailable("anthropic", str(exc))
            return await acall_with_recovery(
                cm, lambda view: _create(self.client, view, kwargs, None, breakpoints=marks), format="anthropic",
                max_retries=self.recovery_retries, reply_tokens=_reply_tokens(kwargs), cache_breakpoints=marks)
        if settings is not None:
            cm.provider_context.observe("anthropic", reply)
        return reply

    async def _stream(self, cm: ContextManager, kwargs: dict[str, Any]) -> AsyncManagedStream:
        """Async :meth:`AnthropicClient._stream`."""
        settings = _settings(cm, kwargs)
        marks = self.cache_breakpoints and _ours_to_mark(cm, kwargs)
        opened = await acall_with_recovery(
            cm, lambda view: _stream_manager(self.client, view, kwargs, settings, breakpoints=marks).__aenter__(),
            format="anthropic", max_retries=self.recovery_retries, reply_tokens=_reply_tokens(kwargs),
            cache_breakpoints=marks)

        async def done(reply: Any) -> None:
            if settings is not None:
                cm.provider_context.observe("anthropic", reply)
            await afinish(cm, getattr(reply, "usage", None), _items(reply), format="anthropic",
                          add_reply=self.add_reply)

        collect, final = anthropic_final(opened)

        async def final_message() -> Any:
            return await final()  # (the check first, then the async SDK's own assembly)

        return AsyncManagedStream(opened, collect=collect, final=final_message, close=opened.close, done=done)


def wrap_anthropic(client: Any, *, recovery_retries: int = DEFAULT_MAX_RETRIES, add_reply: bool = True,
                   retrieval_tools: bool = False, compact_tool: bool = False,
                   cache_breakpoints: bool = True) -> AnthropicClient | AsyncAnthropicClient:
    """Wrap an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic`` (Bedrock/Vertex ones too) to match."""
    _sdk()
    # The SDK's async clients (AsyncAnthropic, AsyncAnthropicBedrock, AsyncAnthropicVertex) share only the prefix.
    if type(client).__name__.startswith("Async"):
        return AsyncAnthropicClient(client, recovery_retries=recovery_retries, add_reply=add_reply,
                                    retrieval_tools=retrieval_tools, compact_tool=compact_tool,
                                    cache_breakpoints=cache_breakpoints)
    return AnthropicClient(client, recovery_retries=recovery_retries, add_reply=add_reply,
                           retrieval_tools=retrieval_tools, compact_tool=compact_tool,
                           cache_breakpoints=cache_breakpoints)
