"""xAI's, Hugging Face TGI's and LM Studio's context-length errors are recovered from (red team, tenth session).

Neither wording was recognised: ``parse_overflow`` answered None, so ``call_with_recovery``, the client wrappers,
the adapters and the proxy passed the error on and the agent stopped at the provider's limit, the first time its
history outgrew it. xAI's API (OpenAI-compatible, Grok) answers 400 ``This model's maximum prompt length is 131072
but the request contains 136973 tokens.`` (seen by Cline's users), newer deployments ``[input_too_large] Current
message (1149677 tokens) exceeds budget (975424 tokens)``; text-generation-inference (Hugging Face Inference
Endpoints, self-hosted TGI) answers 422 ``Input validation error: `inputs` tokens + `max_new_tokens` must be <=
4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens``` or ``… `inputs` must have less than 1024 tokens.
Given: 1168``. LM Studio (local models behind an OpenAI-compatible API: Cline, opencode and Continue point agents at
it) answers ``Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded with
context length of only 7866 tokens, which is not enough.`` and since 0.4 ``Cannot truncate prompt with n_keep (15028)
>= n_ctx (7424)``. Each is read with its figures (the reply's reservation too), so the limit is learned.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import openai
import pytest

from contextfold import ContextManager, call_with_recovery
from contextfold.recovery import parse_overflow
from contextfold.testing import ScriptedLLMServer
from contextfold.testing.server import RecordedRequest, ScriptedReply
from contextfold.testing.wire import ErrorReply

XAI = "This model's maximum prompt length is 131072 but the request contains 136973 tokens."
XAI_NEW = "Failed to start sampling: [input_too_large] Current message (1149677 tokens) exceeds budget (975424 tokens)"
TGI_TOTAL = ("Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens "
             "and 200 `max_new_tokens`")
TGI_INPUT = "Input validation error: `inputs` must have less than 1024 tokens. Given: 1168"
LMS_KEEP = ("Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded with "
            "context length of only 7866 tokens, which is not enough. Try to load the model with a larger context "
            "length, or provide a shorter input")
LMS_N_KEEP = "Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"


@pytest.mark.parametrize(("body", "figures"), [
    ({"code": "Client specified an invalid argument", "error": XAI}, (136973, 131072, None)),
    ({"code": "Client specified an invalid argument", "error": XAI_NEW}, (1149677, 975424, None)),
    ({"error": TGI_TOTAL, "error_type": "validation"}, (4000, 4096, 200)),
    ({"error": TGI_INPUT, "error_type": "validation"}, (1168, 1024, None)),
    ({"error": LMS_KEEP}, (10136, 7866, None)),
    ({"error": LMS_N_KEEP}, (15028, 7424, None)),
])
def test_the_wording_is_an_overflow_with_its_figures(body: dict[str, Any],
                                                     figures: tuple[int, int, int | None]) -> None:
    info = parse_overflow(json.dumps(body))
    assert info is not None
    assert (info.prompt_tokens, info.limit, info.max_tokens) == figures


def test_tgi_validating_other_arguments_is_not_an_overflow() -> None:
    assert parse_overflow({"error": "Input validation error: `max_new_tokens` must be <= 192. Given: 500",
                           "error_type": "validation"}) is None


def xai_refusal(prompt: int, limit: int) -> str:
    return f"This model's maximum prompt length is {limit} but the request contains {prompt} tokens."


def lm_studio_refusal(prompt: int, limit: int) -> str:
    return f"Cannot truncate prompt with n_keep ({prompt}) >= n_ctx ({limit})"


@pytest.mark.parametrize("refusal", [xai_refusal, lm_studio_refusal])
def test_an_agent_at_the_providers_prompt_limit_recovers(refusal: Callable[[int, int], str]) -> None:
    nonce = uuid.uuid4().hex[:8]
    limit = 3_000

    def provider(request: RecordedRequest) -> ScriptedReply:
        if request.input_tokens > limit:
            return ErrorReply("invalid_request", refusal(request.input_tokens, limit))
        return f"done {nonce}"

    with ScriptedLLMServer(handler=provider) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        cm = ContextManager("local-test", max_context_tokens=16_000, store="memory")
        cm.add({"role": "user", "content": f"Task {nonce}: read the logs"})
        for i in range(6):
            cm.add({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": json.dumps({"n": i})}}]})
            cm.add({"role": "tool", "tool_call_id": f"c{i}",
                    "content": "\n".join(f"{nonce} log {i}.{j}: request served" for j in range(60))})
        reply = call_with_recovery(cm, lambda view: client.chat.completions.create(model="local-test", messages=view))
    assert reply.choices[0].message.content == f"done {nonce}"
    assert cm.learned_limit is not None and cm.learned_limit <= limit
