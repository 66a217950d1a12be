"""The pydantic-ai 2.x capability: the history processor, the retrieval toolset and overflow recovery in one.

Split from :mod:`contextfold.integrations.pydantic_ai` because capabilities exist only in pydantic-ai 2.x: that
module keeps working with 1.x (``history_processors=[processor]``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import MissingExtra
from ..recovery import OverflowRecovery, parse_limit_error
from ._retrieval import TOOL_NAMES, answer, offer, tool_specs

try:
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import RetryModelRequest
    from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
    from pydantic_ai.tools import Tool
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - exercised only without the extra (or with pydantic-ai 1.x)
    raise MissingExtra("the pydantic-ai capability", "pydantic-ai", module="pydantic_ai") from exc

if TYPE_CHECKING:
    from pydantic_ai import AgentRunResult
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models import ModelRequestContext

    from ..manager import ContextManager

__all__ = ["ContextfoldCapability", "HistoryProcessor", "request_extras"]


class HistoryProcessor(Protocol):
    """What the capability uses of :class:`~contextfold.integrations.pydantic_ai.ContextfoldHistoryProcessor`.

    Named here rather than imported: the processor module builds the capability, so importing it back would
    tie the two modules in a cycle.
    """

    manager: ContextManager
    retrieval_tools: bool
    compact_tool: bool
    max_retries: int

    async def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]: ...

    def view(self) -> list[ModelMessage]: ...

    def record(self, messages: list[ModelMessage]) -> None: ...


def request_extras(request_context: ModelRequestContext) -> tuple[list[dict[str, Any]], str | None,
                                                                   dict[str, Any] | None]:
    """What a model request sends beside its messages: tool schemas, instructions, a response-format schema.

    pydantic-ai sends the instructions in a field of their own (or as a leading system message), not as a part of
    the history the processor sees: they are counted here.
    """
    parameters = request_context.model_request_parameters
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                               "parameters": t.parameters_json_schema}}
             for t in (*parameters.function_tools, *parameters.output_tools)]
    tools += [{"type": type(t).__name__} for t in parameters.native_tools]
    parts = parameters.instruction_parts
    if parts:
        instructions: str | None = "\n\n".join(part.content for part in parts)
    else:
        latest = next((m for m in reversed(request_context.messages) if isinstance(m, ModelRequest)), None)
        instructions = latest.instructions if latest is not None else None
    output = parameters.output_object
    response_format = {"name": output.name, "schema": output.json_schema} if output is not None else None
    return tools, instructions or None, response_format


def _api_of(model: Any) -> str:
    """Which provider API a pydantic-ai model calls: ``anthropic``, ``openai_responses``, or another."""
    from pydantic_ai.models.wrapper import WrapperModel

    while isinstance(model, WrapperModel):
        model = model.wrapped
    name = type(model).__name__
    if name == "AnthropicModel":
        return "anthropic"
    return "openai_responses" if name == "OpenAIResponsesModel" else name


@dataclass
class ContextfoldCapability(AbstractCapability[Any]):
    """Processes the history before each model request, gives the retrieval tools, recovers from overflow."""

    processor: HistoryProcessor
    # One recovery per request step: its retries count towards the stall guard of that request only.
    _recoveries: dict[tuple[str | None, int], OverflowRecovery] = field(default_factory=dict, repr=False)

    async def before_model_request(self, ctx: RunContext[Any],
                                   request_context: ModelRequestContext) -> ModelRequestContext:
        """Send the manager's view; it becomes the run's history."""
        names = {t.name for t in request_context.model_request_parameters.function_tools}
        offer(self.processor.manager, set(TOOL_NAMES[:2]) <= names, names)
        tools, instructions, response_format = request_extras(request_context)
        await asyncio.to_thread(self.processor.manager.set_request_extras, tools=tools, instructions=instructions,
                                response_format=response_format)
        messages = await self.processor(ctx, list(request_context.messages))
        request_context.messages = self._with_status(messages)
        ctx.messages[:] = messages
        self._recoveries.pop((ctx.run_id, ctx.run_step), None)
        return request_context

    async def prepare_model_request(self, ctx: RunContext[Any],
                                    request_context: ModelRequestContext) -> ModelRequestContext:
        """A retry after an overflow sends the view as recovery shrank it."""
        if (ctx.run_id, ctx.run_step) in self._recoveries:
            view = await asyncio.to_thread(self.processor.view)
            request_context.messages = self._with_status(view)
            ctx.messages[:] = view
        return request_context

    def _with_status(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """``messages`` with the budget line (when on) in the last request: this request only, never the history."""
        status = self.processor.manager.status_message()
        last = messages[-1] if messages else None
        if status is None or not isinstance(last, ModelRequest):
            return list(messages)
        return [*messages[:-1], dataclasses.replace(last, parts=[*last.parts, UserPromptPart(status.text)])]

    async def on_model_request_error(self, ctx: RunContext[Any], *, request_context: ModelRequestContext,
                                     error: Exception) -> ModelResponse:
        """A context-length error shrinks the view and makes another attempt; any other error propagates."""
        info = parse_limit_error(error)
        if info is None:
            raise error
        processor = self.processor
        step = (ctx.run_id, ctx.run_step)
        recovery = self._recoveries.setdefault(step, OverflowRecovery(processor.manager, processor.max_retries, 0))
        try:
            await asyncio.to_thread(recovery.shrink, info, error)  # raises RecoveryFailed when it should not retry
        except BaseException:
            self._recoveries.pop(step, None)  # the step ends here: its recovery is not kept for the capability's life
            raise
        raise RetryModelRequest()

    async def for_run(self, ctx: RunContext[Any]) -> ContextfoldCapability:
        """A copy per run, whose recoveries go with the run.

        One capability serves many runs: kept in it, the recovery of a run's last recovered step was never dropped.
        """
        return dataclasses.replace(self, _recoveries={})

    def get_model_settings(self) -> Any:
        """The provider's context management for the run's model, when ``Policy.compactor`` asks for it.

        An Anthropic model gets ``anthropic_context_management`` and its betas, an OpenAI Responses model
        ``openai_context_management``; settings you gave the agent yourself win. Other models: nothing.
        """
        manager = self.processor.manager

        def resolve(ctx: RunContext[Any]) -> Any:
            from ..provider_context import thinking_enabled

            api = _api_of(ctx.model)
            given = dict(ctx.model_settings or {})
            thinking = thinking_enabled(given.get("anthropic_thinking"))
            settings = manager.provider_context.settings(api, thinking=thinking)
            if settings is None:
                return {}
            management = settings.params["context_management"]
            if api == "anthropic":
                if "anthropic_context_management" in given:
                    return {}
                return {"anthropic_context_management": management, "anthropic_betas": list(settings.betas)}
            return {} if "openai_context_management" in given else {"openai_context_management": management}

        return resolve

    async def after_model_request(self, ctx: RunContext[Any], *, request_context: ModelRequestContext,
                                  response: ModelResponse) -> ModelResponse:
        """Count what the provider compacted for this reply (pydantic-ai does not pass its cleared counts on)."""
        manager = self.processor.manager
        settings = manager.provider_context.engaged
        if settings is not None:
            from pydantic_ai.messages import CompactionPart

            compactions = [{"type": "compaction"} for p in response.parts if isinstance(p, CompactionPart)]
            usage = {"input_tokens": response.usage.input_tokens}
            key = "content" if settings.api == "anthropic" else "output"
            manager.provider_context.observe(settings.api, {key: compactions, "usage": usage})
        return response

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        """Record the run's final reply: no model request follows it, so the history processor never sees it.

        Without it ``cm.status()``, the archive and the report of a finished run missed the answer the user got.
        """
        await asyncio.to_thread(self.processor.record, list(result.all_messages()))
        return result

    def get_toolset(self) -> Any:
        """The retrieval tools, answered from the processor's manager."""
        processor = self.processor
        if not processor.retrieval_tools and not processor.compact_tool:
            return None
        manager = processor.manager
        tools: list[Tool[Any]] = []
        for spec in tool_specs(manager, compact=processor.compact_tool):
            if not processor.retrieval_tools and spec.name in TOOL_NAMES:
                continue
            async def run(_name: str = spec.name, **arguments: Any) -> str:
                return await asyncio.to_thread(answer, manager, _name, arguments)

            tools.append(Tool.from_schema(run, name=spec.name, description=spec.description,
                                          json_schema=spec.parameters))
        return FunctionToolset(tools)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not serializable (it holds a manager)."""
        return None
