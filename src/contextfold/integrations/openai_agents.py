"""OpenAI Agents SDK integration: one call gives the ``RunConfig`` pieces, the hooks and the retrieval tools.

::

    cm = ContextManager(model="gpt-4o", store="memory")
    kit = contextfold_run(cm, hooks=my_hooks)                 # my_hooks: optional, yours keep working
    agent = Agent(name="builder", tools=[*my_tools, *kit.tools], ...)
    result = await Runner.run(agent, "fix the build", run_config=kit.run_config, hooks=kit.hooks)

``kit.run_config`` carries the input filter (the manager's view goes to the model instead of the whole history),
a model provider whose models recover from a context-length error within the run (compact, retry, at most 3
times, stall guard, circuit breaker) and an output guardrail that never trips (``contextfold_run_end``: it marks
the end of a run, so a run nested in a tool, ``Agent.as_tool``, is told from a later one). ``kit.hooks`` grounds
the manager in the usage each call reports and calls your hooks too. ``kit.tools`` are ``tool_output_cache``,
``tool_output_cache_grep`` and ``history_search``.

With ``Policy(compactor="provider")`` or ``"both"`` a Responses model's calls carry ``ModelSettings.
context_management`` (server-side compaction at the hard threshold, ``contextfold.provider_context``) unless you
set your own; the compaction items it returns are boundaries of the manager's view.

The SDK keeps its own full history (``result.to_input_list()``); the filter never changes it. What the manager
has already seen of it lives with the manager, so a filter built anew for every run never adds an item twice. To
keep the compacted history between runs, use :class:`ContextfoldSession`. Needs ``contextfold[openai-agents]``.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..errors import MissingExtra
from ..formats import openai_responses
from ..manager.reconcile import content_key, pin_head, rebase, reconcile, unpinned
from ..pairing import remove_messages
from ..recovery import DEFAULT_MAX_RETRIES, OverflowRecovery, parse_limit_error
from ._calls import record_usage_safely
from ._degrade import prepare_messages
from ._retrieval import TOOL_NAMES, answer, offer, tool_specs

try:
    import agents
    from agents.guardrail import GuardrailFunctionOutput, OutputGuardrail
    from agents.lifecycle import RunHooks
    from agents.models.interface import Model, ModelProvider
    from agents.models.multi_provider import MultiProvider
    from agents.run_config import CallModelData, ModelInputData, RunConfig
    from agents.tool import FunctionTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("the OpenAI Agents SDK integration", "openai-agents", module="agents") from exc

if TYPE_CHECKING:
    from agents.memory import Session

    from ..manager import ContextManager
    from ..messages import Message

__all__ = ["ContextfoldHooks", "ContextfoldInputFilter", "ContextfoldKit", "ContextfoldSession", "RecoveringModel",
           "RecoveringModelProvider", "UsageHooks", "contextfold_run", "request_extras", "retrieval_tools"]

FORMAT = openai_responses.NAME
# The SDK history's name in the manager's record: the input filter and the Session report the same history.
SOURCE = "openai_agents"
# meta["id"] of the agent's instructions, pinned at the head of the view.
INSTRUCTIONS_ID = "openai_agents:instructions"


def _plain(item: Any) -> dict[str, Any]:
    """A Responses input item as a plain dict (the SDK's items are TypedDicts, but pydantic objects slip in)."""
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        dumped: dict[str, Any] = dump(exclude_unset=True)
        return dumped
    raise TypeError(f"expected a Responses input item (dict), got {type(item).__name__}")


def _decode(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    return openai_responses.decode(items)


def _key(item: Mapping[str, Any]) -> str:
    return content_key(item)


def _items(cm: ContextManager, view: Sequence[Message]) -> list[dict[str, Any]]:
    """The view as the SDK's input items, without the pinned instructions (they travel in their own field)."""
    return openai_responses.encode(unpinned(cm, view))


def _sent_view(cm: ContextManager, *, strict: bool) -> list[dict[str, Any]]:
    items = _items(cm, prepare_messages(cm, strict=strict, where="openai_agents"))
    status = cm.status_message()  # the budget line, when on: last, for this call only (never the SDK's history)
    if status is not None:
        items += openai_responses.encode([status])
    return copy.deepcopy(items)


def request_extras(tools: Sequence[Any], handoffs: Sequence[Any],
                   output_schema: Any) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The tool schemas and response-format schema a model call sends, as the manager counts them.

    Function tools and handoffs travel as function schemas; hosted tools (web search, file search, …) by their
    type and name; a structured output type as its JSON schema. The instructions are pinned in the view already.
    """
    schemas: list[dict[str, Any]] = []
    for tool in tools:
        if isinstance(tool, FunctionTool):
            schemas.append({"type": "function", "name": tool.name, "description": tool.description,
                            "parameters": tool.params_json_schema})
        else:
            schemas.append({"type": str(getattr(tool, "type", type(tool).__name__)),
                            "name": str(getattr(tool, "name", ""))})
    for handoff in handoffs:
        schemas.append({"type": "function", "name": handoff.tool_name, "description": handoff.tool_description,
                        "parameters": handoff.input_json_schema})
    response_format = None
    if output_schema is not None and not output_schema.is_plain_text():
        response_format = dict(output_schema.json_schema())
    return schemas, response_format


class _ToolsRunning:
    """How many of the managed run's tools are running (counted by :class:`ContextfoldHooks`).

    A model call on the manager while one runs comes from a run nested in that tool: ``Agent.as_tool`` runs the
    sub-agent with the parent's run config (this filter, this recovering model) but not its hooks, and the parent
    never calls its model while its tools run. The sub-agent's run passes through untouched: fed to the parent's
    manager, its history replaced the parent's (two rebuilds per call) and it was sent the parent's view.
    """

    def __init__(self) -> None:
        self.count = 0
        # The run whose tool started last (as its start hook saw it): once that run is over, no count holds.
        self.claim: _RunClaim | None = None


def _tools_running(cm: ContextManager) -> _ToolsRunning:
    return cm.framework_history.slot("openai_agents.tools_running", _ToolsRunning)


@dataclasses.dataclass(eq=False)
class _RunClaim:
    """The task running a manager's run, and whether that run has produced its final output.

    Mutable on purpose: the run's end is seen by an output guardrail, which the SDK runs in a task of its own; that
    task shares this object with the run's context, never the context itself.
    """

    task: asyncio.Task[Any]
    ended: bool = False


# Each manager's run in progress (its filter was last called in ``task``), as seen from the current task. The SDK
# runs a tool in a task of its own, created by the run's task, so a task started under a run inherits this value:
# an ``Agent.as_tool`` sub-agent, run with the parent's run config inside that tool, finds its parent's claim here.
# From its second turn on the SDK runs a run in the caller's own task, so the claim stays in the caller's context
# after ``Runner.run`` returns: the run's final output ends it (``_RunEnd``), or a later run from a task the caller
# starts (``wait_for``, ``create_task``, ``gather``) would be taken for a nested one and sent unmanaged.
_RUN_CLAIMS: contextvars.ContextVar[dict[int, _RunClaim] | None] = contextvars.ContextVar(
    "contextfold_openai_agents_run_claims", default=None)  # (a dict is never mutated: replaced on each claim)


def _nested(cm: ContextManager, items: Sequence[Any] | None = None) -> bool:
    """Whether a model call on ``cm`` now belongs to a run nested in a tool of the managed run.

    Told by the hooks (``kit.hooks`` count the tools running), or without them: the call comes from a task started
    while the managed run's task is still running that run (it awaits its tools: no final output yet), and its items
    do not extend the history the manager was fed (a sub-agent's own input). A new run that continues the
    conversation is never nested, nor is any run once the managed one is over (:func:`_over`: it may have raised,
    and a tool that raised never reported its end to the hooks).
    """
    claim = (_RUN_CLAIMS.get() or {}).get(id(cm))
    if claim is not None and _over(claim):
        return False
    running = _tools_running(cm)
    if running.count > 0 and (running.claim is None or not _over(running.claim)):
        return True
    return claim is not None and items is not None and not _extends(cm, items)


# Where the SDK's code lives: a task awaiting a coroutine from here is inside one of its runs.
_SDK_DIR = os.path.dirname(os.path.abspath(agents.__file__)) + os.sep


def _over(claim: _RunClaim) -> bool:
    """Whether the claimed run can have no tool running now (a call from another task is then no nested run's).

    The run is over when it produced its final output, when its task is done, or when its task awaits nothing of
    the SDK's any more: a run that raised (a tool's error, ``MaxTurnsExceeded``, a cancellation) calls no public
    callback, but it is gone from its task's await chain (``Task.get_coro``, then each coroutine's ``cr_await``).
    A call from the claim's own task is the run's own (the SDK runs tools in tasks of their own) or a later run's.
    """
    if claim.ended or claim.task.done() or claim.task is _current_task():
        return True
    awaited: Any = claim.task.get_coro()
    for _depth in range(256):  # an await chain is short; the bound only guards against a cycle
        if awaited is None:
            return True
        code = getattr(awaited, "cr_code", None) or getattr(awaited, "gi_code", None) \
            or getattr(awaited, "ag_code", None)
        if code is not None and code.co_filename.startswith(_SDK_DIR):
            return False
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None) \
            or getattr(awaited, "ag_await", None)
    return True


# The managers whose filter, last called in this task (or the one that created it), let a nested run's items pass:
# that run's model call, in the same task or one the SDK starts for it (a timeout, a stream), passes them too.
_PASSED_THROUGH: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "contextfold_openai_agents_passed_through", default=frozenset())


def _model_call_nested(cm: ContextManager) -> bool:
    """Whether the model call now made with ``cm``'s recovering model is a nested run's (its filter said so)."""
    return id(cm) in _PASSED_THROUGH.get() or _nested(cm)


def _filtered(cm: ContextManager, *, passed_through: bool) -> None:
    marked = _PASSED_THROUGH.get()
    if passed_through != (id(cm) in marked):
        _PASSED_THROUGH.set(marked | {id(cm)} if passed_through else marked - {id(cm)})


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop (a synchronous caller)
        return None


def _claim_run(cm: ContextManager) -> None:
    """Record the current task as the one running ``cm``'s run (see :data:`_RUN_CLAIMS`); a new claim per run."""
    task = _current_task()
    claims = _RUN_CLAIMS.get() or {}
    claim = claims.get(id(cm))
    if task is not None and (claim is None or claim.task is not task or claim.ended):
        _RUN_CLAIMS.set({**claims, id(cm): _RunClaim(task)})


class _LastFilterCall:
    """Whether the manager's filter passed the items of its last call through (a nested run's call).

    The parent never calls its model while its tools run, so when a run using the kit's config produces its final
    output, the last filter call on the manager was that run's: passed through for a nested run, managed for the
    managed run. (The SDK checks a run's final output in a task its run loop starts, which does not see the
    context of the task a run's first turn ran in: a context variable set by the filter cannot tell.)
    """

    def __init__(self) -> None:
        self.passed_through = False


def _last_filter_call(cm: ContextManager) -> _LastFilterCall:
    return cm.framework_history.slot("openai_agents.last_filter_call", _LastFilterCall)


class _RunEnd:
    """An output guardrail that never trips: it ends the claim on the manager when a run produces its final output.

    A nested run's end ends none (see :class:`_LastFilterCall`). It shows in ``result.output_guardrail_results``.
    """

    def __init__(self, manager: ContextManager) -> None:
        self.manager = manager

    async def __call__(self, _context: Any, _agent: Any, _output: Any) -> GuardrailFunctionOutput:
        if not _last_filter_call(self.manager).passed_through:
            claim = (_RUN_CLAIMS.get() or {}).get(id(self.manager))
            if claim is not None:
                claim.ended = True
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


def _extends(cm: ContextManager, items: Sequence[Any]) -> bool:
    """Whether ``items`` start with the history the manager was fed."""
    known = cm.framework_history.known(SOURCE)
    if not known:
        return False
    return len(items) >= len(known) and all(_key(_plain(item)) == k for item, k in zip(items, known, strict=False))


class ContextfoldInputFilter:
    """A ``RunConfig.call_model_input_filter`` that sends the manager's view of the history to the model.

    It never changes the items it receives and returns new ones. It keeps no state of its own: build one per run
    or share one, the manager's record decides what is new.

    Args:
        manager: The manager of this agent's conversation.
        count_instructions: Count the agent's instructions against the window (pinned in the manager as a system
            message; they go back to their own field before the call).
        strict: Raise when preparing the view fails instead of sending the smallest valid view.
    """

    def __init__(self, manager: ContextManager, *, count_instructions: bool = True, strict: bool = False) -> None:
        self.manager = manager
        self.count_instructions = count_instructions
        self.strict = strict

    @property
    def rebuilds(self) -> int:
        """How often a history did not extend the one the manager was fed and the view was rebuilt."""
        return self.manager.framework_history.rebuilds

    def filter(self, data: CallModelData[Any]) -> ModelInputData:
        """The synchronous filter: feed the manager what is new, prepare (compacting when due), return the view."""
        cm = self.manager
        instructions = data.model_data.instructions
        agent_tools = {getattr(t, "name", None) for t in getattr(data.agent, "tools", None) or ()}
        items = [_plain(item) for item in data.model_data.input]
        with cm.framework_history.lock:
            # A note on a cut output names the retrieval tools only when this agent has them.
            offer(cm, set(TOOL_NAMES[:2]) <= agent_tools, agent_tools)
            if self.count_instructions and instructions:
                pin_head(cm, INSTRUCTIONS_ID, instructions)
            reconcile(cm, SOURCE, items, key=_key, convert=_decode)
            sent = _sent_view(cm, strict=self.strict)
        return ModelInputData(input=cast("list[Any]", sent), instructions=instructions)

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """The filter as the SDK calls it; compaction (maybe an LLM summary) runs off the event loop.

        A run nested in one of the managed run's tools (an ``Agent.as_tool`` sub-agent) gets its own items back.
        """
        if _nested(self.manager, data.model_data.input):
            _filtered(self.manager, passed_through=True)
            _last_filter_call(self.manager).passed_through = True
            return ModelInputData(input=list(data.model_data.input), instructions=data.model_data.instructions)
        _filtered(self.manager, passed_through=False)
        _last_filter_call(self.manager).passed_through = False
        _claim_run(self.manager)
        return await asyncio.to_thread(self.filter, data)


def retrieval_tools(manager: ContextManager, *, compact_tool: bool = False) -> list[FunctionTool]:
    """``tool_output_cache``, ``tool_output_cache_grep`` and ``history_search`` as the SDK's ``FunctionTool``s.

    ``compact_tool`` adds ``compact_context``: the agent compacts its own context (the same compaction as
    ``/compact``), with optional instructions of what to keep.
    """
    tools: list[FunctionTool] = []
    for spec in tool_specs(manager, compact=compact_tool):
        async def invoke(_context: Any, arguments: str, _name: str = spec.name) -> str:
            return await asyncio.to_thread(answer, manager, _name, arguments)

        tools.append(FunctionTool(name=spec.name, description=spec.description, params_json_schema=spec.parameters,
                                  on_invoke_tool=invoke, strict_json_schema=False))
    return tools


class RecoveringModel(Model):
    """A ``Model`` that recovers from a context-length error within the run: shrink the view, send it again.

    Same classifier, stall guard (at most ``max_retries`` retries, each meaningfully smaller) and circuit breaker
    as the client wrappers. The retried input is the manager's view, so use it with the input filter (as
    :func:`contextfold_run` does).
    """

    def __init__(self, inner: Model, manager: ContextManager, *, max_retries: int = DEFAULT_MAX_RETRIES,
                 strict: bool = False) -> None:
        self.inner = inner
        self.manager = manager
        self.max_retries = max_retries
        self.strict = strict

    async def _counted(self, input: str | list[Any], tools: list[Any], handoffs: list[Any],
                       output_schema: Any) -> str | list[Any]:
        """Tell the manager what this call sends beside the input; a changed count prepares the view again."""
        schemas, response_format = request_extras(tools, handoffs, output_schema)
        changed = await asyncio.to_thread(self.manager.set_request_extras, tools=schemas,
                                          response_format=response_format)
        if not changed or isinstance(input, str):
            return input
        # The filter prepared the view without these (the first call of an agent): under the thresholds with them.
        return cast("list[Any]", await asyncio.to_thread(_sent_view, self.manager, strict=self.strict))

    async def _shrink(self, recovery: OverflowRecovery, exc: Exception) -> list[Any] | None:
        info = parse_limit_error(exc)
        if info is None:
            return None
        await asyncio.to_thread(recovery.shrink, info, exc)
        sent = await asyncio.to_thread(_sent_view, self.manager, strict=self.strict)
        return cast("list[Any]", sent)

    def _provider_settings(self, model_settings: Any) -> tuple[Any, bool]:
        """``model_settings`` with the provider's context management when the policy asks for it (and it fits)."""
        from agents.models.openai_responses import OpenAIResponsesModel

        api = "openai_responses" if isinstance(self.inner, OpenAIResponsesModel) else "openai_chat"
        settings = self.manager.provider_context.settings(api)
        if settings is None:
            return model_settings, False
        if getattr(model_settings, "context_management", None) is None:
            managed = copy.deepcopy(list(settings.params["context_management"]))
            model_settings = dataclasses.replace(model_settings, context_management=managed)
        return model_settings, True

    def _observe(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        self.manager.provider_context.observe("openai_responses", {
            "output": [_plain(item) if not isinstance(item, Mapping) else item for item in response.output],
            "usage": {"input_tokens": getattr(usage, "input_tokens", 0)}})

    async def get_response(self, system_instructions: str | None, input: str | list[Any], model_settings: Any,
                           tools: list[Any], output_schema: Any, handoffs: list[Any], tracing: Any, *,
                           previous_response_id: str | None, conversation_id: str | None,
                           prompt: Any) -> Any:
        """The inner model's response; a context-length error shrinks the view and retries."""
        if _model_call_nested(self.manager):  # a sub-agent's call: its input is not the manager's view
            return await self.inner.get_response(
                system_instructions, input, model_settings, tools, output_schema, handoffs, tracing,
                previous_response_id=previous_response_id, conversation_id=conversation_id, prompt=prompt)
        recovery = OverflowRecovery(self.manager, self.max_retries, 0)
        model_settings, managed = self._provider_settings(model_settings)
        input = await self._counted(input, tools, handoffs, output_schema)
        while True:
            try:
                response = await self.inner.get_response(
                    system_instructions, input, model_settings, tools, output_schema, handoffs, tracing,
                    previous_response_id=previous_response_id, conversation_id=conversation_id, prompt=prompt)
                if managed:
                    self._observe(response)
                return response
            except Exception as exc:
                retry = await self._shrink(recovery, exc)
                if retry is None:
                    raise
                input = retry

    async def stream_response(self, system_instructions: str | None, input: str | list[Any], model_settings: Any,
                              tools: list[Any], output_schema: Any, handoffs: list[Any], tracing: Any, *,
                              previous_response_id: str | None, conversation_id: str | None,
                              prompt: Any) -> AsyncIterator[Any]:
        """The inner model's stream; an overflow before the first event shrinks the view and retries."""
        if _model_call_nested(self.manager):  # a sub-agent's call: its input is not the manager's view
            async for event in self.inner.stream_response(
                    system_instructions, input, model_settings, tools, output_schema, handoffs, tracing,
                    previous_response_id=previous_response_id, conversation_id=conversation_id, prompt=prompt):
                yield event
            return
        recovery = OverflowRecovery(self.manager, self.max_retries, 0)
        model_settings, _ = self._provider_settings(model_settings)
        input = await self._counted(input, tools, handoffs, output_schema)
        while True:
            started = False
            try:
                async for event in self.inner.stream_response(
                        system_instructions, input, model_settings, tools, output_schema, handoffs, tracing,
                        previous_response_id=previous_response_id, conversation_id=conversation_id, prompt=prompt):
                    started = True
                    yield event
                return
            except Exception as exc:
                retry = None if started else await self._shrink(recovery, exc)
                if retry is None:
                    raise
                input = retry

    async def close(self) -> None:
        """Close the inner model."""
        await self.inner.close()


class RecoveringModelProvider(ModelProvider):
    """A ``ModelProvider`` whose models are :class:`RecoveringModel`s around those of ``inner``."""

    def __init__(self, manager: ContextManager, inner: ModelProvider | None = None, *,
                 max_retries: int = DEFAULT_MAX_RETRIES, strict: bool = False) -> None:
        self.manager = manager
        self.inner = inner or MultiProvider()
        self.max_retries = max_retries
        self.strict = strict

    def get_model(self, model_name: str | None) -> Model:
        """The inner provider's model, recovering."""
        return RecoveringModel(self.inner.get_model(model_name), self.manager, max_retries=self.max_retries,
                               strict=self.strict)

    async def aclose(self) -> None:
        """Close the inner provider."""
        close = getattr(self.inner, "aclose", None)
        if callable(close):
            await close()


class ContextfoldHooks(RunHooks[Any]):
    """``RunHooks`` that ground the manager in the usage each model call reports, then call ``inner``'s hooks.

    The SDK has one ``hooks=`` slot: this composes with the user's own hooks instead of taking it.
    """

    def __init__(self, manager: ContextManager, inner: RunHooks[Any] | None = None) -> None:
        self.manager = manager
        self.inner = inner

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        """Record the usage of the call that just returned, then call the inner hook."""
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "input_tokens", 0) if usage is not None else 0
        if tokens:
            await asyncio.to_thread(record_usage_safely, self.manager,
                                    {"input_tokens": tokens, "output_tokens": getattr(usage, "output_tokens", 0)})
        if self.inner is not None:
            await self.inner.on_llm_end(context, agent, response)

    async def on_llm_start(self, *args: Any, **kwargs: Any) -> None:
        """Call the inner hook (the managed run calls its model: none of its tools runs)."""
        _tools_running(self.manager).count = 0  # a tool that raised never reported its end
        if self.inner is not None:
            await self.inner.on_llm_start(*args, **kwargs)

    async def on_agent_start(self, *args: Any, **kwargs: Any) -> None:
        """Call the inner hook."""
        _tools_running(self.manager).count = 0  # a new run, or a handoff: no tool of the run is running
        if self.inner is not None:
            await self.inner.on_agent_start(*args, **kwargs)

    async def on_agent_end(self, *args: Any, **kwargs: Any) -> None:
        """Call the inner hook."""
        if self.inner is not None:
            await self.inner.on_agent_end(*args, **kwargs)

    async def on_handoff(self, *args: Any, **kwargs: Any) -> None:
        """Call the inner hook."""
        if self.inner is not None:
            await self.inner.on_handoff(*args, **kwargs)

    async def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
        """Count the tool as running (model calls until it ends are a nested run's), then call the inner hook."""
        running = _tools_running(self.manager)
        running.count += 1
        running.claim = (_RUN_CLAIMS.get() or {}).get(id(self.manager))
        if self.inner is not None:
            await self.inner.on_tool_start(*args, **kwargs)

    async def on_tool_end(self, *args: Any, **kwargs: Any) -> None:
        """Count the tool as ended, then call the inner hook."""
        running = _tools_running(self.manager)
        running.count = max(0, running.count - 1)
        if self.inner is not None:
            await self.inner.on_tool_end(*args, **kwargs)


# The name the README showed before ContextfoldHooks composed with the user's hooks.
UsageHooks = ContextfoldHooks


@dataclasses.dataclass(frozen=True, slots=True)
class ContextfoldKit:
    """What :func:`contextfold_run` gives: ``Runner.run(..., run_config=kit.run_config, hooks=kit.hooks)``."""

    run_config: RunConfig
    hooks: ContextfoldHooks
    tools: list[FunctionTool]


def contextfold_run(manager: ContextManager, *, hooks: RunHooks[Any] | None = None,
                    run_config: RunConfig | None = None, model: Model | None = None, strict: bool = False,
                    max_retries: int = DEFAULT_MAX_RETRIES, compact_tool: bool = False) -> ContextfoldKit:
    """The run configuration, hooks and retrieval tools that keep an SDK run inside its window.

    Args:
        manager: The conversation's manager.
        hooks: Your own ``RunHooks``; they are called as before.
        run_config: Your ``RunConfig``; the filter and a recovering model provider are set on a copy.
        model: A ``Model`` object to run every agent with (recovering); models named by string are wrapped
            through the provider. An agent's own ``Model`` object bypasses the provider: wrap it in
            :class:`RecoveringModel` or pass it here.
        strict: Raise when preparing the view fails instead of sending the smallest valid view.
        max_retries: Overflow retries per model call.
        compact_tool: Add ``compact_context`` to ``kit.tools`` (the agent compacts its own context).
    """
    base = run_config or RunConfig()
    chosen = model if model is not None else base.model
    if isinstance(chosen, Model) and not isinstance(chosen, RecoveringModel):
        chosen = RecoveringModel(chosen, manager, max_retries=max_retries, strict=strict)
    config = dataclasses.replace(
        base, model=chosen,
        call_model_input_filter=ContextfoldInputFilter(manager, strict=strict),
        output_guardrails=[*(base.output_guardrails or ()),
                           OutputGuardrail(_RunEnd(manager), name="contextfold_run_end")],
        model_provider=RecoveringModelProvider(manager, base.model_provider, max_retries=max_retries, strict=strict))
    return ContextfoldKit(run_config=config, hooks=ContextfoldHooks(manager, hooks),
                          tools=retrieval_tools(manager, compact_tool=compact_tool))


class ContextfoldSession:
    """An SDK ``Session`` whose history is the manager's view, persisted compacted in an inner session.

    ``add_items`` feeds the manager what it has not seen (big tool outputs are truncated at once, the full text kept
    by ref) and compacts when the policy says so; ``get_items`` returns the view. The inner session, when given,
    always holds the view as the manager has it, so a process that reopens it resumes from the compacted history;
    the full record stays in the manager's archive and tool output cache. ``run_compaction`` makes the runner
    treat it as compaction-aware. It shares the manager's record with the input filter: used together, no item
    is added twice.

    Args:
        manager: The manager of this conversation.
        inner: Where the compacted history is persisted (``SQLiteSession``, a Redis session, …); None keeps it in
            the manager only.
        session_id: Defaults to the inner session's id, else the manager's.
        strict: Raise when preparing the view fails instead of returning the smallest valid view.
    """

    session_settings: Any = None

    def __init__(self, manager: ContextManager, inner: Session | None = None, *,
                 session_id: str | None = None, strict: bool = False) -> None:
        self.manager = manager
        self.inner = inner
        self.strict = strict
        self.session_id: str = session_id or (inner.session_id if inner is not None else manager.session_id)
        self.session_settings = getattr(inner, "session_settings", None)
        self._persisted: list[dict[str, Any]] | None = None  # what the inner session holds, read on first use
        self._handed: list[dict[str, Any]] | None = None  # the SDK's history: the items handed out and added since
        self._lock = asyncio.Lock()

    async def _load(self) -> None:
        """Read the inner session once; a manager that has seen nothing of this history resumes from it."""
        if self._persisted is not None:
            return
        stored = [_plain(item) for item in await self.inner.get_items()] if self.inner is not None else []
        cm = self.manager
        if stored and cm.framework_history.known(SOURCE) is None and not unpinned(cm, cm.messages()):
            await cm.aadd(copy.deepcopy(stored), format=FORMAT)
            rebase(cm, SOURCE, stored, _key)
        self._persisted = stored

    async def _persist(self, items: list[dict[str, Any]]) -> None:
        """Make the inner session hold ``items``: append when they extend what it holds, else rewrite it."""
        if self.inner is None or items == self._persisted:
            return
        held = self._persisted or []
        if items[:len(held)] == held:
            await self.inner.add_items(cast("list[Any]", copy.deepcopy(items[len(held):])))
        else:
            await self.inner.clear_session()
            if items:
                await self.inner.add_items(cast("list[Any]", copy.deepcopy(items)))
        self._persisted = copy.deepcopy(items)

    async def _view(self) -> list[dict[str, Any]]:
        view = await asyncio.to_thread(prepare_messages, self.manager, strict=self.strict, where="openai_agents")
        return _items(self.manager, view)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The compacted history (the latest ``limit`` items when given)."""
        async with self._lock:
            await self._load()
            items = await self._view()
            await self._persist(items)
            if limit is None:
                # The run starts from these items: they are the SDK's history now.
                self._handed = copy.deepcopy(items)
                rebase(self.manager, SOURCE, items, _key)
            out = copy.deepcopy(items)
        return out[-limit:] if limit else out

    async def add_items(self, items: list[Any]) -> None:
        """Feed the manager the items it has not seen and persist the view, compacted when the policy says so."""
        async with self._lock:
            await self._load()
            cm = self.manager
            base = self._handed if self._handed is not None else _items(cm, cm.messages())
            history = [*base, *(_plain(item) for item in items)]
            await asyncio.to_thread(reconcile, cm, SOURCE, history, key=_key, convert=_decode, shorter_ok=True)
            self._handed = history
            await self._persist(await self._view())

    async def run_compaction(self, args: Mapping[str, Any] | None = None) -> None:
        """Compact now (``force``) or as the policy says, and persist the view; the runner calls it after turns."""
        async with self._lock:
            await self._load()
            cm = self.manager
            if args and args.get("force"):
                try:
                    await asyncio.to_thread(cm.compact, force=True)
                except Exception:
                    if self.strict:
                        raise
            await self._persist(await self._view())

    async def pop_item(self) -> Any:
        """Remove and return the latest item; a tool result takes its call with it (no call is left unanswered)."""
        async with self._lock:
            await self._load()
            cm = self.manager
            popped: list[dict[str, Any]] = []

            def drop_last(view: list[Message]) -> list[Message]:
                if not unpinned(cm, view):
                    return view
                last = view[-1]
                last_items = openai_responses.encode([last])
                popped.append(last_items[-1])
                if last.role == "tool":
                    # A result goes with its call: the history must stay valid for the next request.
                    return remove_messages(view, [len(view) - 1])
                # An assistant turn spans several items (reasoning, message, calls): keep all but the last.
                rest = openai_responses.decode(last_items[:-1]) if len(last_items) > 1 else []
                return [*view[:-1], *(m.with_meta(**dict(last.meta)) for m in rest)]

            cm.rewrite_view(drop_last, reason="pop_item")
            items = _items(cm, cm.messages())
            self._handed = copy.deepcopy(items)
            rebase(cm, SOURCE, items, _key)
            await self._persist(items)
        return copy.deepcopy(popped[0]) if popped else None

    async def clear_session(self) -> None:
        """Forget the conversation (the manager archives the view first) and clear the inner session."""
        async with self._lock:
            cm = self.manager
            cm.rewrite_view(lambda _view: [], reason="clear_session")
            cm.framework_history.forget()
            if self.inner is not None:
                await self.inner.clear_session()
            self._persisted = []
            self._handed = []
