"""What the provider call wrappers share: checking the caller's keywords and recording a reply in the manager."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["MAX_RETRIEVAL_ROUNDS", "afinish", "arecord_usage_safely", "check_retrieval", "count_extras", "dump",
           "finish", "record_usage_safely", "refused_settings", "reject", "retrieval_results", "streaming",
           "with_retrieval_tools"]

# What TokenUsage raises for a report it cannot read: a count below zero ("unknown" as -1), a fraction, cached tokens
# above the prompt (OpenAI-compatible servers send all three), a value too large for a float.
_UNREADABLE_USAGE = (ValueError, TypeError, OverflowError)


def reject(kwargs: Mapping[str, Any], names: Iterable[str], where: str) -> None:
    """Refuse keywords the wrapper fills from the ContextManager."""
    for name in names:
        if name in kwargs:
            raise ConfigError(f"the conversation comes from the ContextManager: add messages with cm.add(...) "
                              f"instead of passing {name}=", field=f"{where}.{name}")


def streaming(kwargs: Mapping[str, Any], retrieval_tools: bool, where: str) -> bool:
    """Whether the call streams; retrieval rounds answered inside the call need the whole reply, so not both."""
    stream = kwargs.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ConfigError(f"must be true or false, got {stream!r}", field=f"{where}.stream")
    if stream and retrieval_tools:
        raise ConfigError("retrieval_tools=True answers the model's retrieval calls inside the call, which needs the "
                          "whole reply: stream without it (answer them with cm.cache.execute_tool_call)",
                          field=f"{where}.stream")
    return bool(stream)


def count_extras(cm: ContextManager, kwargs: Mapping[str, Any]) -> None:
    """Tell the manager what the call sends beside the messages, so that the view leaves room for it.

    ``tools``; instructions in a field of their own (Responses ``instructions``, Anthropic ``system`` given as a
    keyword); a structured-output schema (Chat ``response_format``, Responses ``text.format``, a pydantic model).
    """
    tools = [t if isinstance(t, Mapping) else _plain(t) for t in kwargs.get("tools") or ()]
    instructions = kwargs.get("instructions")
    system = kwargs.get("system")
    if isinstance(system, list):  # Anthropic's system blocks
        system = "\n".join(str(b.get("text", "")) if isinstance(b, Mapping) else str(b) for b in system)
    texts = [t for t in (instructions, system) if isinstance(t, str) and t]
    text = kwargs.get("text")
    schema = kwargs.get("response_format")
    if schema is None and isinstance(text, Mapping):
        schema = text.get("format")
    cm.set_request_extras(tools=tools, instructions="\n\n".join(texts) or None, response_format=_schema(schema))


def _plain(obj: Any) -> dict[str, Any]:
    dumped = obj.model_dump(exclude_none=True) if hasattr(obj, "model_dump") else {"name": str(obj)}
    return dict(dumped)


def _schema(value: Any) -> dict[str, Any] | None:
    if isinstance(value, Mapping):
        return dict(value) if value.get("type") not in (None, "text") or "schema" in value else None
    json_schema = getattr(value, "model_json_schema", None)  # a pydantic model class (litellm, .parse())
    return {"schema": json_schema()} if callable(json_schema) else None


def finish(cm: ContextManager, usage: Any, items: list[dict[str, Any]], *, format: str, add_reply: bool) -> None:
    """Ground the manager in the reported usage and append the reply to the history."""
    from ..formats.intake import repair_reply_arguments

    if usage is not None:
        record_usage_safely(cm, usage)
    if add_reply and items:
        cm.add(repair_reply_arguments(format, items), format=format)


async def afinish(cm: ContextManager, usage: Any, items: list[dict[str, Any]], *, format: str,
                  add_reply: bool) -> None:
    """Async :func:`finish`."""
    from ..formats.intake import repair_reply_arguments

    if usage is not None:
        await arecord_usage_safely(cm, usage)
    if add_reply and items:
        await cm.aadd(repair_reply_arguments(format, items), format=format)


def record_usage_safely(cm: ContextManager, usage: Any) -> None:
    """``cm.record_usage(usage)``, or a warning when the report cannot be read: the reply is in hand (and paid for).

    Raised after the model answered, the parser's error would lose the reply and end the agent's turn over
    bookkeeping; set aside, the count stays ours until the next readable report (as the proxy does).
    """
    try:
        cm.record_usage(usage)
    except _UNREADABLE_USAGE as exc:
        _warn_unreadable(cm, exc)


async def arecord_usage_safely(cm: ContextManager, usage: Any) -> None:
    """Async :func:`record_usage_safely`."""
    try:
        await cm.arecord_usage(usage)
    except _UNREADABLE_USAGE as exc:
        _warn_unreadable(cm, exc)


def _warn_unreadable(cm: ContextManager, exc: BaseException) -> None:
    from ..telemetry import CompactWarning

    cm.tracer.emit(CompactWarning(session_id=cm.session_id, code="usage_unreadable",
                                  message=f"the provider's usage report was set aside ({type(exc).__name__}: {exc}); "
                                          "token counts stay contextfold's own until the next readable report"))


def refused_settings(exc: BaseException) -> bool:
    """Whether a provider error refuses the context-management settings themselves (not the conversation).

    An API version or a model without the feature answers 400 naming the parameter or its beta; the call is then
    made again without them (``cm.provider_context.unavailable``), and contextfold manages the context.
    """
    status = getattr(exc, "status_code", None)
    text = str(exc).lower()
    return status == 400 and ("context_management" in text or "anthropic-beta" in text) and "messages." not in text


def dump(obj: Any) -> dict[str, Any]:
    """An SDK object (pydantic) or a dict as a plain dict without None values."""
    if isinstance(obj, Mapping):
        return {k: v for k, v in obj.items() if v is not None}
    dumped: dict[str, Any] = obj.model_dump(exclude_none=True)
    return dumped


# -- the retrieval tools in the wrapped call (opt-in) --------------------------------------------------------------
# Rounds of retrieval calls answered inside one wrapped call before the reply goes back to the caller anyway.
MAX_RETRIEVAL_ROUNDS = 8


def with_retrieval_tools(cm: ContextManager, kwargs: dict[str, Any], format: str, *, enabled: bool,
                         where: str, compact: bool = False) -> dict[str, Any]:
    """``kwargs`` with the retrieval tools (``enabled``) and ``compact_context`` (``compact``) in ``tools=``.

    The manager is told either way. A note on a cut output names the tools only when the model has them: opted
    in, or already in ``tools=``.
    """
    from ..formats.tool_schemas import tool_schema
    from ._retrieval import TOOL_NAMES, offer, tool_specs

    tools = list(kwargs.get("tools") or ())
    names = {_tool_name(t) for t in tools}
    if enabled or compact:
        specs = [s for s in tool_specs(cm, compact=compact) if enabled or s.name not in TOOL_NAMES]
        added = [s for s in specs if s.name not in names]
        tools += [tool_schema(format, s.name, s.description, s.parameters) for s in added]
        names |= {s.name for s in added}
        kwargs = {**kwargs, "tools": tools}
    offer(cm, enabled or set(TOOL_NAMES[:2]) <= names, names)
    return kwargs


def _tool_name(tool: Any) -> Any:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        return function.get("name") if isinstance(function, Mapping) else tool.get("name")
    return getattr(tool, "name", None)


def retrieval_results(cm: ContextManager, items: list[dict[str, Any]], format: str,
                      compact: bool = False) -> list[dict[str, Any]] | None:
    """The answers to a reply whose tool calls are all ours, as items to add; None otherwise.

    Ours: the retrieval calls, and ``compact_context`` with ``compact``. A reply that also calls the caller's own
    tools goes back to the caller whole (its loop answers every call; ``cm.cache.execute_tool_call`` answers the
    retrieval ones).
    """
    from ._retrieval import answer, answered_names

    calls: list[tuple[str, str, Any]] = []  # (id, name, arguments)
    for item in items:
        if format == "openai_chat":
            calls += [(c["id"], c["function"]["name"], c["function"].get("arguments"))
                      for c in item.get("tool_calls") or ()]
        elif format == "openai_responses" and item.get("type") == "custom_tool_call":
            return None  # a custom tool is always the caller's (ours are functions): its loop answers the reply
        elif format == "openai_responses" and item.get("type") == "function_call":
            calls.append((item["call_id"], item["name"], item.get("arguments")))
        elif format == "anthropic":
            calls += [(b["id"], b["name"], b.get("input")) for b in item.get("content") or ()
                      if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    if not calls or any(name not in answered_names(compact) for _, name, _ in calls):
        return None
    answers = [(call_id, answer(cm, name, arguments, call_id)) for call_id, name, arguments in calls]
    if format == "openai_chat":
        return [{"role": "tool", "tool_call_id": call_id, "content": text} for call_id, text in answers]
    if format == "openai_responses":
        return [{"type": "function_call_output", "call_id": call_id, "output": text} for call_id, text in answers]
    return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}
                                         for call_id, text in answers]}]


def check_retrieval(retrieval_tools: bool, add_reply: bool, where: str, compact_tool: bool = False) -> None:
    """The wrapper answers retrieval calls in the history, so it must add the replies to it."""
    if retrieval_tools and not add_reply:
        raise ConfigError("retrieval_tools=True answers the model's retrieval calls in the history, which needs "
                          "add_reply=True", field=f"{where}.retrieval_tools")
    if compact_tool and not add_reply:
        raise ConfigError("compact_tool=True answers the model's compact_context calls in the history, which needs "
                          "add_reply=True", field=f"{where}.compact_tool")
