"""LM Studio's context-length errors are recovered from (red team, tenth session).

LM Studio serves local models behind an OpenAI-compatible API (Cline, opencode and Continue users point their agents
at it). Its refusals were not recognised: ``parse_overflow`` answered None and the agent stopped with a 400 the
first time its history outgrew the model's loaded context: ``Trying to keep the first 10136 tokens when context the
overflows. However, the model is loaded with context length of only 7866 tokens, which is not enough.`` (Cline's
users), and since 0.4 ``Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)`` (opencode's users). Both are
read with the prompt's size and the loaded context, so the limit is learned.
"""

from __future__ import annotations

import json
import uuid

import openai
import pytest

from contextfold import ContextManager, call_with_recovery
from contextfold.recovery import parse_overflow
from contextfold.testing import ScriptedLLMServer
from contextfold.testing.server import RecordedRequest, ScriptedReply
from contextfold.testing.wire import ErrorReply

KEEP = ("Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded with context "
        "length of only 7866 tokens, which is not enough. Try to load the model with a larger context length, or "
        "provide a shorter input")
N_KEEP = "Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"


@pytest.mark.parametrize(("text", "figures"), [(KEEP, (10136, 7866)), (N_KEEP, (15028, 7424))])
def test_the_wording_is_an_overflow_with_its_figures(text: str, figures: tuple[int, int]) -> None:
    for error in (text, json.dumps({"error": text})):
        info = parse_overflow(error)
        assert info is not None
        assert (info.prompt_tokens, info.limit) == figures


def test_an_agent_at_lm_studios_loaded_context_recovers() -> None:
    nonce = uuid.uuid4().hex[:8]
    loaded = 3_000

    def lm_studio(request: RecordedRequest) -> ScriptedReply:
        if request.input_tokens > loaded:
            return ErrorReply("invalid_request", f"Cannot truncate prompt with n_keep ({request.input_tokens}) >= "
                                                 f"n_ctx ({loaded})")
        return f"done {nonce}"

    with ScriptedLLMServer(handler=lm_studio) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="lm-studio", max_retries=0)
        cm = ContextManager("qwen-local", max_context_tokens=16_000, store="memory")
        cm.add({"role": "user", "content": f"Task {nonce}: read the logs"})
        for i in range(6):
            cm.add({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": json.dumps({"n": i})}}]})
            cm.add({"role": "tool", "tool_call_id": f"c{i}",
                    "content": "\n".join(f"{nonce} log {i}.{j}: request served" for j in range(60))})
        reply = call_with_recovery(cm, lambda view: client.chat.completions.create(model="qwen-local", messages=view))
    assert reply.choices[0].message.content == f"done {nonce}"
    assert cm.learned_limit is not None and cm.learned_limit <= loaded
