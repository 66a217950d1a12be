"""An agent run with twelve ordinary tools against a provider whose limit is below the manager's window.

One runner per framework and client wrapper, each driving the real SDK over loopback HTTP to the scripted server,
which enforces the limit (counting tools and instructions as a provider does) and answers with the provider's
real error body. The manager is gpt-4o's (128K window) and is told nothing about the tools: the adapters must
count what they send. ``tests/integrations/test_overflow_runs.py`` runs each briefly;
``bench/bench_overflow.py`` runs them all at length and prints the table.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contextfold.manager import ContextManager
from contextfold.telemetry import RecordingTelemetry, RecoveryLimitLearned, RecoveryOverflow
from contextfold.testing.agent_run import (
    FINAL_ANSWER,
    ORDINARY_TOOLS,
    chat_tools,
    reading_script,
    responses_tools,
    run_tool,
)
from contextfold.testing.server import ScriptedLLMServer

# The provider accepts 16K tokens; the manager believes gpt-4o's 128K.
PROVIDER_LIMIT = 16_000
TASK = "Read the build log page by page with read_file and tell me where the build fails."
INSTRUCTIONS = "You are a build engineer. Use the tools; answer in one sentence when every page is read."
# (framework, API, streams?) of every case; "messages" is Anthropic's API.
CASES: tuple[tuple[str, str, bool], ...] = tuple(
    (framework, api, stream)
    for framework, apis in (("openai client", ("chat", "responses")), ("anthropic client", ("messages",)),
                            ("agents sdk", ("chat", "responses")), ("langchain", ("chat", "responses")),
                            ("pydantic-ai", ("chat", "responses")))
    for api in apis for stream in (False, True))
# LiteLLM needs an environment of its own in CI (tests/litellm_env): its cases are listed apart.
LITELLM_CASES: tuple[tuple[str, str, bool], ...] = (("litellm client", "chat", False), ("litellm client", "chat", True))


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one run did: overflow errors, learned limits, compactions, requests, and whether it finished."""

    framework: str
    api: str
    stream: bool
    overflows: int
    learned: int
    compactions: int
    requests: int
    completed: bool
    largest_after_overflow: int
    streamed: int
    sent_tools: tuple[str, ...] = ()
    counted_tools: tuple[str, ...] = ()
    error: str = ""

    @property
    def converged(self) -> bool:
        """Finished with at most one overflow error per learned limit, and no request over the limit after one."""
        return self.completed and self.overflows <= max(self.learned, 0) and \
            self.largest_after_overflow <= PROVIDER_LIMIT


def anthropic_tools() -> list[dict[str, Any]]:
    return [{"name": s.name, "description": s.description, "input_schema": dict(s.parameters)}
            for s in ORDINARY_TOOLS]


def run_case(framework: str, api: str, stream: bool, *, turns: int, window: int | None = None,
             limit: int = PROVIDER_LIMIT) -> Outcome:
    """Run the page-reading agent for ``turns`` tool turns in ``framework``; never raises (the error is kept).

    ``window``: the manager's window (None: the model's own, far above the provider's ``limit``).
    """
    events = RecordingTelemetry()
    model = "claude-sonnet-4-5" if api == "messages" else "gpt-4o"
    cm = ContextManager(model, max_context_tokens=window, store="memory", archive="memory", telemetry=events,
                        session_id="overflow-run")
    error = ""
    final = None
    with ScriptedLLMServer(reading_script(turns), context_window=limit, validator="formats") as server:
        try:
            final = RUNNERS[framework](server, cm, api, stream, turns)
        except Exception as exc:  # the table reports it
            error = f"{type(exc).__name__}: {exc}"[:300]
        requests = list(server.requests)
    cm.close()
    statuses = [r.status for r in requests]
    first = statuses.index(400) if 400 in statuses else len(requests)
    after = [r.input_tokens for r in requests[first + 1:]]
    return Outcome(framework=framework, api=api, stream=stream,
                   overflows=len(events.of_type(RecoveryOverflow)),
                   learned=sum(1 for e in events.of_type(RecoveryLimitLearned) if e.source == "error"),
                   compactions=cm.compactions, requests=len(requests),
                   completed=not error and final == FINAL_ANSWER and statuses[-1:] == [200],
                   largest_after_overflow=max(after, default=0),
                   streamed=sum(1 for r in requests if r.body.get("stream") is True),
                   sent_tools=tuple(sorted(_names(requests[-1].body.get("tools") if requests else None))),
                   counted_tools=tuple(sorted(_names(cm.tools))), error=error)


def _names(tools: Any) -> set[str]:
    """Tool names from schemas of any provider's shape."""
    names: set[str] = set()
    for tool in tools or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        if isinstance(name, str):
            names.add(name)
    return names


# -- client wrappers --------------------------------------------------------------------------------------------------
def _openai_client(server: ScriptedLLMServer, cm: ContextManager, api: str, stream: bool, turns: int) -> Any:
    import openai

    from contextfold.integrations.openai_client import wrap_openai

    llm: Any = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0))
    cm.add({"role": "user", "content": TASK})
    for _ in range(turns + 1):
        if api == "chat":
            reply = llm.chat(cm, model="gpt-4o", tools=chat_tools(), stream=stream)
            reply = reply.until_done() if stream else reply
            message = reply.choices[0].message
            calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()]
            cm.add([{"role": "tool", "tool_call_id": i, "content": run_tool(n, a)} for i, n, a in calls])
            text = message.content
        else:
            reply = llm.responses(cm, model="gpt-4o", tools=responses_tools(), instructions=INSTRUCTIONS,
                                  stream=stream)
            reply = reply.until_done() if stream else reply
            calls = [(i.call_id, i.name, i.arguments) for i in reply.output if i.type == "function_call"]
            cm.add([{"type": "function_call_output", "call_id": i, "output": run_tool(n, a)} for i, n, a in calls],
                   format="openai_responses")
            text = reply.output_text
        if not calls:
            return text
    return None


def _anthropic_client(server: ScriptedLLMServer, cm: ContextManager, api: str, stream: bool, turns: int) -> Any:
    import anthropic

    from contextfold.integrations.anthropic_client import wrap_anthropic

    llm: Any = wrap_anthropic(anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0))
    cm.add({"role": "user", "content": TASK})
    for _ in range(turns + 1):
        reply = llm.messages(cm, model="claude-sonnet-4-5", max_tokens=1_024, tools=anthropic_tools(),
                             system=INSTRUCTIONS, stream=stream)
        reply = reply.until_done() if stream else reply
        calls = [(b.id, b.name, b.input) for b in reply.content if b.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in reply.content if b.type == "text")
        cm.add({"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": run_tool(n, a)}
                                            for i, n, a in calls]}, format="anthropic")
    return None


def _litellm_client(server: ScriptedLLMServer, cm: ContextManager, api: str, stream: bool, turns: int) -> Any:
    from contextfold.integrations.litellm_client import completion

    options = {"model": "openai/gpt-4o", "api_base": server.base_url, "api_key": "t", "max_retries": 0}
    cm.add({"role": "user", "content": TASK})
    for _ in range(turns + 1):
        reply = completion(cm, tools=chat_tools(), stream=stream, **options)
        reply = reply.until_done() if stream else reply
        message = reply.choices[0].message
        calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()]
        if not calls:
            return message.content
        cm.add([{"role": "tool", "tool_call_id": i, "content": run_tool(n, a)} for i, n, a in calls])
    return None


# -- frameworks -------------------------------------------------------------------------------------------------------
def _agents_sdk(server: ScriptedLLMServer, cm: ContextManager, api: str, stream: bool, turns: int) -> Any:
    from agents import Agent, FunctionTool, Runner, set_tracing_disabled
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
    from agents.models.openai_responses import OpenAIResponsesModel
    from openai import AsyncOpenAI

    from contextfold.integrations.openai_agents import contextfold_run

    set_tracing_disabled(True)

    def tool(name: str, description: str, parameters: dict[str, Any]) -> FunctionTool:
        async def invoke(_context: Any, arguments: str) -> str:
            return run_tool(name, arguments)

        return FunctionTool(name=name, description=description, params_json_schema=parameters,
                            on_invoke_tool=invoke, strict_json_schema=False)

    async def run() -> Any:
        client = AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        model: Any = OpenAIResponsesModel("gpt-4o", client) if api == "responses" else \
            OpenAIChatCompletionsModel("gpt-4o", client)
        kit = contextfold_run(cm, model=model)
        agent = Agent(name="builder", instructions=INSTRUCTIONS,
                      tools=[tool(s.name, s.description, dict(s.parameters)) for s in ORDINARY_TOOLS])
        try:
            if stream:
                streamed = Runner.run_streamed(agent, TASK, run_config=kit.run_config, hooks=kit.hooks,
                                               max_turns=turns + 5)
                async for _ in streamed.stream_events():
                    pass
                return streamed.final_output
            result = await Runner.run(agent, TASK, run_config=kit.run_config, hooks=kit.hooks, max_turns=turns + 5)
            return result.final_output
        finally:
            await client.close()

    return asyncio.run(run())


def _langchain(server: ScriptedLLMServer, cm: ContextManager, api: str, stream: bool, turns: int) -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI

    from contextfold.integrations.langchain import ContextfoldMiddleware

    def tool(name: str, description: str, parameters: dict[str, Any]) -> StructuredTool:
        def invoke(**arguments: Any) -> str:
            return run_tool(name, arguments)

        return StructuredTool.from_function(func=invoke, name=name, description=description, args_schema=parameters)

    model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="t", max_retries=0,  # type: ignore[arg-type]
                       use_responses_api=api == "responses", streaming=stream, stream_usage=True)
    agent = create_agent(model, tools=[tool(s.name, s.description, dict(s.parameters)) for s in ORDINARY_TOOLS],
                         system_prompt=INSTRUCTIONS, middleware=[ContextfoldMiddleware(cm)])
    request = {"messages": [{"role": "user", "content": TASK}]}
    config = {"recursion_limit": 4 * turns + 20}
    if stream:
        state: Any = None
        for state in agent.stream(request, config=config, stream_mode="values"):  # type: ignore[arg-type]
            pass
    else:
        state = agent.invoke(request, config=config)  # type: ignore[arg-type]
    return _text(state["messages"][-1].content)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))


def _pydantic_ai(server: ScriptedLLMServer, cm: ContextManager, api: str, stream: bool, turns: int) -> Any:
    from openai import AsyncOpenAI
    from pydantic_ai import Agent, Tool
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    from contextfold.integrations.pydantic_ai import ContextfoldHistoryProcessor

    def tool(name: str, description: str, parameters: dict[str, Any]) -> Tool[Any]:
        def invoke(**arguments: Any) -> str:
            return run_tool(name, arguments)

        return Tool.from_schema(invoke, name=name, description=description, json_schema=parameters)

    async def run() -> Any:
        client = AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        provider = OpenAIProvider(openai_client=client)
        model: Any = OpenAIResponsesModel("gpt-4o", provider=provider) if api == "responses" else \
            OpenAIChatModel("gpt-4o", provider=provider)
        processor = ContextfoldHistoryProcessor(cm)
        agent: Agent[None, str] = Agent(model, instructions=INSTRUCTIONS, capabilities=[processor.capability()],
                                        tools=[tool(s.name, s.description, dict(s.parameters))
                                               for s in ORDINARY_TOOLS])
        limits = UsageLimits(request_limit=4 * turns + 20)
        try:
            if stream:
                output = None
                async with agent.run_stream_events(TASK, usage_limits=limits) as events:
                    async for event in events:  # the model's parts as they stream, then the run's result
                        output = getattr(getattr(event, "result", None), "output", output)
                return output
            return (await agent.run(TASK, usage_limits=limits)).output
        finally:
            await client.close()

    return asyncio.run(run())


RUNNERS: dict[str, Callable[[ScriptedLLMServer, ContextManager, str, bool, int], Any]] = {
    "openai client": _openai_client, "anthropic client": _anthropic_client, "litellm client": _litellm_client,
    "agents sdk": _agents_sdk,
    "langchain": _langchain, "pydantic-ai": _pydantic_ai}


def table(outcomes: list[Outcome]) -> str:
    """The results as a Markdown table."""
    rows = ["| framework | API | streaming | overflow errors | limits learned | compactions | requests | completed |",
            "|---|---|---|---:|---:|---:|---:|---|"]
    for o in outcomes:
        done = "yes" if o.completed else f"no ({o.error})" if o.error else "no"
        rows.append(f"| {o.framework} | {o.api} | {'yes' if o.stream else 'no'} | {o.overflows} | {o.learned} | "
                    f"{o.compactions} | {o.requests} | {done} |")
    return "\n".join(rows)


def as_json(outcome: Outcome) -> str:
    return json.dumps({k: getattr(outcome, k) for k in Outcome.__dataclass_fields__})
