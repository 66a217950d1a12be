"""Old reasoning cleared the way clear_thinking does: the last N turns kept, the turn in a tool loop always whole."""

from __future__ import annotations

import itertools
import json
from typing import Any

import anthropic
import openai
import pytest
from _pc_session import ANTHROPIC_MODEL, OPENAI_MODEL, SYSTEM, THINKING, server, tool_output

from contextfold import ContextManager, Policy
from contextfold.formats import get_format
from contextfold.integrations.anthropic_client import wrap_anthropic
from contextfold.integrations.openai_client import wrap_openai
from contextfold.messages import Message, ThinkingPart, ToolCall
from contextfold.provider_context import clear_old_reasoning
from contextfold.testing import RecordedRequest, Reply, ScriptedToolCall


def _thinks(m: Message) -> bool:
    return not isinstance(m.content, str) and any(isinstance(p, ThinkingPart) for p in m.content)


def _history(turns: int, *, loop: bool) -> list[Message]:
    out = [Message.system("sys")]
    for t in range(turns):
        out.append(Message.user(f"request {t}"))
        out.append(Message("assistant", (ThinkingPart(f"plan {t}", signature=f"s{t}"),), (ToolCall(f"c{t}", "f"),)))
        out.append(Message.tool(f"c{t}", f"out {t}"))
        if not (loop and t == turns - 1):
            out.append(Message("assistant", (ThinkingPart(f"done {t}", signature=f"d{t}"), )))
    return out


@pytest.mark.parametrize(("keep", "loop", "kept_turns"), [(2, False, {3, 4}), (0, False, set()), (0, True, {4}),
                                                         (1, True, {4}), (9, False, {0, 1, 2, 3, 4})])
def test_the_last_turns_keep_their_reasoning_and_a_turn_in_a_tool_loop_stays_whole(keep: int, loop: bool,
                                                                                     kept_turns: set[int]) -> None:
    history = _history(5, loop=loop)
    cleared = clear_old_reasoning(history, keep)
    thinking_turns = {int(m.parts[0].text.split()[1]) for m in cleared.messages if _thinks(m)}  # type: ignore[union-attr]
    assert thinking_turns == kept_turns
    assert [m.tool_calls for m in cleared.messages] == [m.tool_calls for m in history]  # calls never go
    assert clear_old_reasoning(cleared.messages, keep).parts == 0  # idempotent


def test_clearing_a_responses_reasoning_item_unlinks_its_turn() -> None:
    items = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "E1"},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "done", "annotations": []}]},
        {"type": "message", "role": "user", "content": "next"},
    ]
    fmt = get_format("openai_responses")
    cleared = clear_old_reasoning(fmt.decode(items), 0)
    assert fmt.encode(cleared.messages) == [
        items[0], {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}, items[3],
        items[4], items[5]]


def _thinker(request: RecordedRequest) -> Reply:
    """Two tool calls per user request, then an answer; every step thinks."""
    n = request.number
    thought = f"Step {n}: " + " ".join(f"consider option {k} for the build" for k in range(12))  # ~90 tokens
    if n % 3 == 0:
        return Reply(text=f"Answer {n}.", reasoning=thought)
    return Reply(reasoning=thought, tool_calls=(ScriptedToolCall("bash", {"n": n}, id=f"call_{n}"),))


def _drive(provider: str, cm: ContextManager, llm: Any, requests: int) -> None:
    for r in range(requests):
        cm.add({"role": "user", "content": f"request {r}: carry on"})
        for _ in range(3):
            if provider == "anthropic":
                reply = llm.messages(cm, model=ANTHROPIC_MODEL, max_tokens=2_000, thinking=THINKING)
                calls = [b for b in reply.content if b.type == "tool_use"]
                if not calls:
                    break
                cm.add({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c.id,
                                                     "content": tool_output(r, 60)} for c in calls]})
            else:
                reply = llm.responses(cm, model=OPENAI_MODEL, store=False)
                calls = [o for o in reply.output if o.type == "function_call"]
                if not calls:
                    break
                cm.add([{"type": "function_call_output", "call_id": c.call_id, "output": tool_output(r, 60)}
                        for c in calls], format="openai_responses")


def _reasoning_sent(request: RecordedRequest) -> int:
    text = json.dumps(request.body)
    return text.count('"type": "thinking"') + text.count('"type": "reasoning"')


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_old_reasoning_is_cleared_and_every_request_stays_valid(provider: str) -> None:
    policy = Policy(keep_thinking_turns=1, clear_at_least=250)  # cleared three thoughts at a time
    with server(handler=_thinker) as llm:
        cm = ContextManager(model=ANTHROPIC_MODEL if provider == "anthropic" else OPENAI_MODEL, store="memory",
                            archive="memory", policy=policy)
        cm.add({"role": "system", "content": SYSTEM})
        if provider == "anthropic":
            client: Any = wrap_anthropic(anthropic.Anthropic(base_url=llm.url, api_key="test", max_retries=0))
        else:
            client = wrap_openai(openai.OpenAI(base_url=llm.base_url, api_key="test", max_retries=0))
        _drive(provider, cm, client, requests=6)
    assert not llm.invalid_requests, llm.invalid_requests[0].invalid
    sent = [_reasoning_sent(r) for r in llm.requests]
    # Every reply thought, so without clearing the last request would carry all earlier reasoning; with it the
    # count drops whenever a batch of old turns is cleared, and the turn in its tool loop always keeps its own.
    assert any(later < earlier for earlier, later in itertools.pairwise(sent))
    assert sent[-1] < len(llm.requests) - 1
