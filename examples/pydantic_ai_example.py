"""A pydantic-ai agent that reads a long build log, kept inside its context window by contextfold.

Run it as is and it talks to a scripted model on 127.0.0.1 with an 8,000-token window (no key needed); set
OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server) to use a real model instead::

    python examples/pydantic_ai_example.py
"""

from __future__ import annotations

import os
from contextlib import ExitStack

from pydantic_ai import Agent, UsageLimits
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from contextfold.integrations.pydantic_ai import ContextfoldHistoryProcessor
from contextfold.manager import ContextManager
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

MODEL = "gpt-4o"
# Pages the agent reads: enough output to overflow the offline window several times.
PAGES = 30
# The offline model's window: small, so that compaction has to happen.
OFFLINE_WINDOW = 8_000


def read_log(page: int) -> str:
    """Read one page (about 3 KB) of the build log."""
    return f"build log page {page}\n" + "\n".join(f"line {i}: compiling module_{page}_{i} ... ok" for i in range(80))


def connect(stack: ExitStack) -> tuple[OpenAIChatModel, int | None]:
    """A model for the real API when configured, else for a scripted model started here."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return OpenAIChatModel(MODEL, provider=OpenAIProvider()), None
    script = [Reply.calling(ScriptedToolCall("read_log", {"page": p})) for p in range(PAGES)]
    server = stack.enter_context(ScriptedLLMServer([*script, f"Read {PAGES} pages: every module compiled."],
                                                   context_window=OFFLINE_WINDOW, validator="formats"))
    return OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=server.base_url, api_key="offline")), OFFLINE_WINDOW


def main() -> None:
    with ExitStack() as stack:
        model, window = connect(stack)
        cm = ContextManager(MODEL, max_context_tokens=window, store="memory", archive="memory")
        processor = ContextfoldHistoryProcessor(cm)
        # pydantic-ai 2.x takes the processor as a capability; 1.x as Agent(history_processors=[processor]).
        agent = Agent(model, tools=[read_log], capabilities=[processor.capability()],
                      system_prompt=f"Read the build log pages 0 to {PAGES - 1}, then summarize.")
        result = agent.run_sync("Why does the build fail?", usage_limits=UsageLimits(request_limit=PAGES + 5))
        print(result.output)
        print(f"history: {len(result.all_messages())} messages")
        print(cm.status().line())


if __name__ == "__main__":
    main()
