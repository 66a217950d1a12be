"""A managed Agents SDK run that raises while its tools run is over: the next run on the manager is managed.

issue 21 §3, the known hole left by the ``Agent.as_tool`` pass-through: a run's end was seen only through its final
output (an output guardrail). A run that raised after calling tools left its claim live in the caller's context, so
a later run from a task the caller starts (``create_task``, ``gather``, ``wait_for`` on 3.11) whose input does not
extend the manager's history (a retry of the same question, a new conversation) was taken for a run nested in a tool
and went to the model unmanaged: never fed to the manager, its big tool output never cut.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from contextfold.integrations.openai_agents import contextfold_run
from contextfold.manager import ContextManager
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

set_tracing_disabled(True)

BIG = "\n".join(f"row {i}: value {i * 7} ok" for i in range(6_000))


class ToolBroke(RuntimeError):
    pass


def _broken() -> str:
    raise ToolBroke("the disk is gone")


broken_tool = function_tool(_broken, name_override="read_disk", failure_error_function=None)


@function_tool
def read_report() -> str:
    """Read the whole report."""
    return BIG


def _model(server: ScriptedLLMServer) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-4o", AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0))


@pytest.mark.parametrize("model_in", ["agents", "kit"])
@pytest.mark.parametrize("turns_before", [0, 1])
def test_a_run_that_raises_mid_tools_ends_its_claim(model_in: str, turns_before: int) -> None:
    with ScriptedLLMServer(context_window=128_000, validator="formats") as server:
        # turns_before=1: the tool raises on the run's second turn (the SDK runs it in the caller's own task).
        server.push(*[Reply.calling(ScriptedToolCall("read_report", {}, id=f"r{i}")) for i in range(turns_before)],
                    Reply.calling(ScriptedToolCall("read_disk", {}, id="call_d")), "The report is fine.")
        cm = ContextManager(model="gpt-4o", store="memory", archive="memory",
                            session_id=f"agents-failed-run-{model_in}-{turns_before}")
        own = model_in == "agents"
        kit = contextfold_run(cm) if own else contextfold_run(cm, model=_model(server))
        agent = Agent(name="builder", instructions="Answer.", tools=[broken_tool, read_report],
                      **({"model": _model(server)} if own else {}))  # type: ignore[arg-type]
        retry = [{"role": "user", "content": "Is the report fine?"},
                 {"type": "function_call", "call_id": "c9", "name": "read_report", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "c9", "output": BIG}]

        async def failed_then_retried() -> str:
            with pytest.raises(Exception, match="the disk is gone"):
                await Runner.run(agent, "Is the report fine?", run_config=kit.run_config)
            second = await asyncio.create_task(Runner.run(agent, retry,  # type: ignore[arg-type]
                                                          run_config=kit.run_config))
            return str(second.final_output)

        assert asyncio.run(failed_then_retried()) == "The report is fine."
        sent = server.requests[-1].body["input"]
        assert [i.get("role") or i.get("type") for i in sent] == ["user", "function_call", "function_call_output"]
        # Managed: the manager was fed the retry, and its 36 KB output went out cut, with a ref.
        assert [m.text for m in cm.messages() if m.role == "user"] == ["Is the report fine?"]
        assert "ref=tout_" in sent[2]["output"] and len(sent[2]["output"]) * 2 < len(BIG)


@pytest.mark.parametrize("model_in", ["agents", "kit"])
def test_a_run_with_the_hooks_that_raises_mid_tools_leaves_no_tool_running(model_in: str) -> None:
    # With kit.hooks the tool's start was counted and its end never came (it raised): every later model call on the
    # manager was taken for a nested run's until a run with the hooks started. A next run without them (the same
    # task: a retry in an except block) went unmanaged.
    with ScriptedLLMServer(context_window=128_000, validator="formats") as server:
        server.push(Reply.calling(ScriptedToolCall("read_disk", {}, id="call_d")), "The report is fine.")
        cm = ContextManager(model="gpt-4o", store="memory", archive="memory",
                            session_id=f"agents-failed-run-hooks-{model_in}")
        own = model_in == "agents"
        kit = contextfold_run(cm) if own else contextfold_run(cm, model=_model(server))
        agent = Agent(name="builder", instructions="Answer.", tools=[broken_tool, read_report],
                      **({"model": _model(server)} if own else {}))  # type: ignore[arg-type]
        retry = [{"role": "user", "content": "Is the report fine?"},
                 {"type": "function_call", "call_id": "c9", "name": "read_report", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "c9", "output": BIG}]

        async def failed_then_retried() -> str:
            try:
                await Runner.run(agent, "Is the report fine?", run_config=kit.run_config, hooks=kit.hooks)
            except Exception:  # the tool's error; the retry is the point
                second = await Runner.run(agent, retry, run_config=kit.run_config)  # type: ignore[arg-type]
                return str(second.final_output)
            raise AssertionError("the first run was meant to fail")

        assert asyncio.run(failed_then_retried()) == "The report is fine."
        sent = server.requests[-1].body["input"]
        assert [m.text for m in cm.messages() if m.role == "user"] == ["Is the report fine?"]
        assert "ref=tout_" in sent[2]["output"] and len(sent[2]["output"]) * 2 < len(BIG)
