"""An OpenAI Agents SDK agent that reads a long build log, kept inside its context window by contextfold.

Run it as is and it talks to a scripted model on 127.0.0.1 with an 8,000-token window (no key needed); set
OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server) to use a real model instead::

    python examples/openai_agents_example.py
"""

from __future__ import annotations

import asyncio
import os
from contextlib import ExitStack

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from contextfold.integrations.openai_agents import ContextfoldSession, contextfold_run
from contextfold.manager import ContextManager
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

MODEL = "gpt-4o"
# Pages the agent reads: enough output to overflow the offline window several times.
PAGES = 30
# The offline model's window: small, so that compaction has to happen.
OFFLINE_WINDOW = 8_000


@function_tool
def read_log(page: int) -> str:
    """Read one page (about 3 KB) of the build log."""
    return f"build log page {page}\n" + "\n".join(f"line {i}: compiling module_{page}_{i} ... ok" for i in range(80))


def connect(stack: ExitStack) -> tuple[AsyncOpenAI, int | None]:
    """A client for the real API when configured, else for a scripted model started here."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return AsyncOpenAI(), None
    script = [Reply.calling(ScriptedToolCall("read_log", {"page": p})) for p in range(PAGES)]
    server = stack.enter_context(ScriptedLLMServer([*script, f"Read {PAGES} pages: every module compiled."],
                                                   context_window=OFFLINE_WINDOW, validator="formats"))
    return AsyncOpenAI(base_url=server.base_url, api_key="offline"), OFFLINE_WINDOW


async def main() -> None:
    set_tracing_disabled(True)
    with ExitStack() as stack:
        client, window = connect(stack)
        async with client:  # closes its HTTP connections when the run is over
            await run(client, window)


async def run(client: AsyncOpenAI, window: int | None) -> None:
    """One agent run over the build log, with contextfold keeping it inside the window."""
    with ContextManager(MODEL, max_context_tokens=window, store="memory", archive="memory") as cm:
        # One call: the run config (input filter + a model that recovers from overflow), hooks, retrieval tools.
        kit = contextfold_run(cm, model=OpenAIResponsesModel(MODEL, client))
        agent = Agent(name="builder", instructions=f"Read the build log pages 0 to {PAGES - 1}, then summarize.",
                      tools=[read_log, *kit.tools])
        # The session persists the compacted history; it shares the manager's record with the filter.
        session = ContextfoldSession(cm, SQLiteSession("build-chat"))
        result = await Runner.run(agent, "Why does the build fail?", session=session, max_turns=PAGES + 5,
                                  run_config=kit.run_config, hooks=kit.hooks)
        print(result.final_output)
        print(cm.status().line())


if __name__ == "__main__":
    asyncio.run(main())
