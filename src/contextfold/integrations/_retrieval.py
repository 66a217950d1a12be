"""The retrieval tools every adapter gives the agent, defined once and answered from the session's manager.

``tool_output_cache``, ``tool_output_cache_grep`` and ``history_search`` carry the same names, descriptions and
schemas in every framework as in the client wrappers; so does ``compact_context`` (the agent compacts its own
context, :mod:`contextfold.steering.compact_tool`), given only when asked for (``compact_tool=True``).

Whether the agent has them decides the wording of the notes on cut outputs (``cache.names_retrieval_tools``) and
of the notes the manager writes for the model (compaction receipts, the budget line): a note names a tool only
when the agent can call it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..archive.search import HISTORY_SEARCH_TOOL, HistorySearchTool, history_search_schema
from ..cache import GREP_TOOL, READ_TOOL, retrieval_tool_schemas
from ..messages import ToolCall
from ..steering.compact_tool import COMPACT_CONTEXT_TOOL, compact_context_spec, run_compact_context

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["AGENT_TOOL_NAMES", "TOOL_NAMES", "ToolSpec", "answer", "answered_names", "offer", "tool_specs"]

TOOL_NAMES = (READ_TOOL, GREP_TOOL, HISTORY_SEARCH_TOOL)
# Every tool contextfold can give the agent: the retrieval tools and compact_context.
AGENT_TOOL_NAMES = (*TOOL_NAMES, COMPACT_CONTEXT_TOOL)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One retrieval tool: its name, description and JSON schema of the arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


def tool_specs(cm: ContextManager | None = None, *, compact: bool = False) -> list[ToolSpec]:
    """The tools ``cm`` can answer (the cache reads with a cache, history_search with an archive); all without.

    ``compact`` adds ``compact_context`` (the same compaction as ``/compact``, asked for by the agent).
    """
    schemas: list[dict[str, Any]] = []
    if cm is None or cm.cache is not None:
        schemas.extend(dict(s) for s in retrieval_tool_schemas("openai_responses"))
    if cm is None or cm.archive is not None:
        schemas.append(history_search_schema("openai_responses"))
    specs = [ToolSpec(str(s["name"]), str(s["description"]), dict(s["parameters"])) for s in schemas]
    if compact:
        specs.append(ToolSpec(*compact_context_spec()))
    return specs


def answered_names(compact: bool) -> tuple[str, ...]:
    """The tool names an adapter answers itself: the retrieval tools, and compact_context when it gives it."""
    return AGENT_TOOL_NAMES if compact else TOOL_NAMES


def offer(cm: ContextManager, offered: bool, names: Iterable[Any] | None = None) -> None:
    """Tell the manager whether the agent has the retrieval tools (the notes of cut outputs follow).

    With ``names`` (the agent's tool names), also which of contextfold's tools it has: receipts and the budget
    line name only those.
    """
    if cm.cache is not None:
        cm.cache.names_retrieval_tools = offered
    if names is not None:
        cm.steering.offer({n for n in names if n in AGENT_TOOL_NAMES})


def answer(cm: ContextManager, name: str, arguments: str | Mapping[str, Any] | None, call_id: str = "call") -> str:
    """The result text of a retrieval tool call; a bad call gets a text saying what to fix, never an exception."""
    raw = _arguments_text(name, arguments)
    if raw.startswith("error: "):
        return raw
    call = ToolCall(call_id, name, raw or "{}")
    if name == COMPACT_CONTEXT_TOOL:
        steering = cm.steering
        return run_compact_context(cm, call, tools=steering.agent_tools,
                                   messages_since_compaction=steering.messages_since_compaction)
    if name == HISTORY_SEARCH_TOOL:
        if cm.archive is None:
            return "error: history_search is not available: this session keeps no archive"
        cache = cm.cache
        tool = HistorySearchTool(cm.archive, cm.session_id, resolve_ref=cache.get if cache is not None else None,
                                 on_bad_line=lambda problem: _report_bad_line(cm, problem))
        return str(tool.execute_tool_call(call).text)
    if name in (READ_TOOL, GREP_TOOL):
        if cm.cache is None:
            return f"error: {name} is not available: this session keeps no tool output cache"
        return str(cm.cache.execute_tool_call(call).text)
    return f"error: unknown tool {name!r}; the retrieval tools are {', '.join(AGENT_TOOL_NAMES)}"


def _arguments_text(name: str, arguments: Any) -> str:
    """The arguments as the JSON text a provider sends, or an ``error: …`` text when they cannot be one.

    LangChain and pydantic-ai hand over a mapping the model's JSON was parsed into, or a framework put anything in
    (bytes, sets, objects, nesting past the encoder's recursion): the model is told, nothing raises.
    """
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(dict(arguments or {}))
    except RecursionError:
        return f"error: the arguments of {name} are nested too deeply; send a flat JSON object"
    except (TypeError, ValueError) as exc:
        return f"error: the arguments of {name} must be a JSON object ({exc})"


def _report_bad_line(cm: ContextManager, problem: str) -> None:
    """An archived line history_search skipped: a ``compact.warning`` (code ``archive_line_skipped``) says which."""
    from ..telemetry import CompactWarning

    cm.tracer.emit(CompactWarning(session_id=cm.session_id, code="archive_line_skipped",
                                  message=f"history_search skipped an unreadable archived line: {problem}"))
