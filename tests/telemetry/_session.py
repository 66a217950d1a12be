"""A short agent session that makes contextfold mask, summarize and archive: the trace tests drive it."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall

# Calls the session makes; in an 8K window, enough for maskings and at least two summaries.
TURNS = 40
WINDOW = 8_000


def turn(i: int) -> list[Message]:
    call = ToolCall(f"call_{i}", "bash", json.dumps({"cmd": f"cat file_{i}.py"}))
    output = f"file_{i}.py line {i}: " + " ".join(f"value_{i}_{k}" for k in range(165))
    return [Message.assistant(f"reading file_{i}.py to find the failing parser case", [call]),
            Message.tool(call.id, output, name="bash")]


def session_manager(telemetry: Any, session_id: str = "trace-demo", **kw: Any) -> ContextManager:
    return ContextManager("gpt-4o", max_context_tokens=WINDOW, store="memory", archive="memory",
                          telemetry=telemetry, session_id=session_id, agent="parser-fixer", **kw)


def run_session(cm: ContextManager, around_call: Callable[[int], AbstractContextManager[Any]] | None = None) -> None:
    """Add a system prompt and task, then TURNS model calls, each preceded by one tool round trip."""
    cm.add([Message.system("You fix parser bugs. Keep the failing test names."),
            Message.user("test_parser.py::test_nested fails; find out why and fix it")])
    for i in range(TURNS):
        cm.add(turn(i))
        with (around_call(i) if around_call is not None else nullcontext()):
            cm.prepare()
        cm.record_usage({"prompt_tokens": cm.tokens(), "completion_tokens": 20})
