"""A LangChain v1 ``create_agent`` agent that reads a long build log, kept inside its window by contextfold.

Run it as is and it talks to a scripted model on 127.0.0.1 with an 8,000-token window (no key needed); set
OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server) to use a real model instead::

    python examples/langchain_example.py
"""

from __future__ import annotations

import os
from contextlib import ExitStack

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from contextfold.integrations.langchain import ContextfoldMiddleware
from contextfold.manager import ContextManager
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

MODEL = "gpt-4o"
# Pages the agent reads: enough output to overflow the offline window several times.
PAGES = 30
# The offline model's window: small, so that compaction has to happen.
OFFLINE_WINDOW = 8_000
# Each tool turn passes through the middleware, model and tools nodes.
RECURSION_LIMIT = 10 * PAGES


@tool
def read_log(page: int) -> str:
    """Read one page (about 3 KB) of the build log."""
    return f"build log page {page}\n" + "\n".join(f"line {i}: compiling module_{page}_{i} ... ok" for i in range(80))


def connect(stack: ExitStack) -> tuple[ChatOpenAI, int | None]:
    """A chat model for the real API when configured, else for a scripted model started here."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return ChatOpenAI(model=MODEL), None
    script = [Reply.calling(ScriptedToolCall("read_log", {"page": p})) for p in range(PAGES)]
    server = stack.enter_context(ScriptedLLMServer([*script, f"Read {PAGES} pages: every module compiled."],
                                                   context_window=OFFLINE_WINDOW, validator="formats"))
    return ChatOpenAI(model=MODEL, base_url=server.base_url, api_key="offline"), OFFLINE_WINDOW  # type: ignore[arg-type]


def main() -> None:
    with ExitStack() as stack:
        model, window = connect(stack)
        stack.callback(model.root_client.close)  # its HTTP connections, before the server stops
        cm = stack.enter_context(ContextManager(MODEL, max_context_tokens=window, store="memory", archive="memory"))
        # "before_model" persists the compacted history in the agent state (and its checkpoints);
        # mode="wrap_model_call" would leave the state whole and compact each request only.
        agent = create_agent(model, tools=[read_log], middleware=[ContextfoldMiddleware(cm)],
                             system_prompt=f"Read the build log pages 0 to {PAGES - 1}, then summarize.",
                             checkpointer=InMemorySaver())
        state = agent.invoke({"messages": [{"role": "user", "content": "Why does the build fail?"}]},
                             config={"recursion_limit": RECURSION_LIMIT, "configurable": {"thread_id": "build"}})
        print(state["messages"][-1].content)
        print(f"state: {len(state['messages'])} messages")
        print(cm.status().line())


if __name__ == "__main__":
    main()
