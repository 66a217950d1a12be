"""A scripted agent session through the client wrappers, against the scripted server (real SDKs over loopback)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

from contextfold import ContextManager, Policy
from contextfold.integrations.anthropic_client import wrap_anthropic
from contextfold.integrations.openai_client import wrap_openai
from contextfold.telemetry import RecordingTelemetry
from contextfold.testing import RecordedRequest, Reply, ScriptedLLMServer, ScriptedToolCall

SYSTEM = "You are a build agent. Fix what the user asks, one tool call at a time."
ANTHROPIC_MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-4o"
THINKING = {"type": "enabled", "budget_tokens": 1024}


def scripted(request: RecordedRequest) -> Reply:
    """Every call thinks and calls one tool; the ids are unique per request."""
    n = request.number
    return Reply(text=f"Checking step {n}.", reasoning=f"Step {n}: the last output decides the next command.",
                 tool_calls=(ScriptedToolCall("bash", {"cmd": f"make step-{n}"}, id=f"call_{n}"),))


def tool_output(turn: int, lines: int) -> str:
    """A tool output of ``lines`` distinct lines (about 9 tokens each), unique to its turn."""
    return "\n".join(f"turn {turn} line {i}: value {turn * 1000 + i}" for i in range(lines))


@dataclass
class Session:
    """What one scripted session produced."""

    cm: ContextManager
    server: ScriptedLLMServer
    telemetry: RecordingTelemetry
    replies: list[Any] = field(default_factory=list)


def run_session(server: ScriptedLLMServer, provider: str, *, turns: int, policy: Policy | None = None,
                window: int = 64_000, lines: int = 250, thinking: bool = True, **manager: Any) -> Session:
    """``turns`` tool turns through ``wrap_anthropic`` or ``wrap_openai(...).responses``."""
    telemetry = RecordingTelemetry()
    model = ANTHROPIC_MODEL if provider == "anthropic" else OPENAI_MODEL
    manager.setdefault("store", "memory")
    manager.setdefault("archive", "memory")
    cm = ContextManager(model=model, max_context_tokens=window, policy=policy or Policy(), telemetry=telemetry,
                        **manager)
    cm.add([{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Make the build green."}])
    session = Session(cm, server, telemetry)
    if provider == "anthropic":
        llm: Any = wrap_anthropic(anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0))
    else:
        llm = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0))
    for turn in range(turns):
        if provider == "anthropic":
            options: dict[str, Any] = {"thinking": THINKING} if thinking else {}
            reply = llm.messages(cm, model=model, max_tokens=2_000, **options)
            calls = [b for b in reply.content if b.type == "tool_use"]
            cm.add({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c.id,
                                                 "content": tool_output(turn, lines)} for c in calls]},
                   format="anthropic")
        else:
            reply = llm.responses(cm, model=model, store=False, include=["reasoning.encrypted_content"])
            calls = [o for o in reply.output if o.type == "function_call"]
            cm.add([{"type": "function_call_output", "call_id": c.call_id, "output": tool_output(turn, lines)}
                    for c in calls], format="openai_responses")
        session.replies.append(reply)
    return session


def server(**options: Any) -> ScriptedLLMServer:
    """A scripted server answering :func:`scripted`, validating every request with the formats' validators."""
    options.setdefault("handler", scripted)
    options.setdefault("validator", "formats")
    return ScriptedLLMServer(**options)
