"""An overflow error counting far more than the request held teaches other sessions the model's limit, not less.

Found by the twenty-first red team through ``wrap_openai`` against the scripted server on loopback: an overflow
error whose count of the request is ten times ours (``maximum context length is 6000 tokens. However, your
messages resulted in 115200 tokens`` for a request of 11,520 by our count: a gateway adding its own prompt, one
counting what the caller did not pass, or one summing a conversation). Recovery took the whole factor for the
tokenizer's and stored the model's limit at 6,000 / 10 tokens for every session of the store: on 8c274dd every
later session of the model, nothing to do with the refused one, had a 382-token budget: its first request was
compacted to one message, and one carrying 2,300 tokens of tools stopped before its first call
(``InsufficientBudget: the tool schemas ... more than the hard budget of 382``). A factor beyond what a tokenizer
can be off (the counter's calibration bound, 2.5) belongs to the refused request: the session keeps it, the store
keeps the limit under the bounded factor.
"""

from __future__ import annotations

import json

import openai

from contextfold import ContextManager
from contextfold.integrations.openai_client import wrap_openai
from contextfold.recovery._recovery import SHARED_RATIO_MAX
from contextfold.stores.memory import MemoryBlobStore
from contextfold.testing import ErrorReply, RecordedRequest, ScriptedLLMServer
from contextfold.testing.server import ScriptedReply

NONCE = "rt21-overcount-4b9e"
MODEL = "gpt-4o"
PROVIDER_LIMIT = 6_000
OVERCOUNT = 10


def _history(turns: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": f"You help with {NONCE}."},
            *[m for i in range(turns) for m in ({"role": "user", "content": f"{NONCE} q{i} " + "word " * 300},
                                                 {"role": "assistant", "content": f"a{i} " + "text " * 300})],
            {"role": "user", "content": f"{NONCE} final"}]


def test_an_overcounting_error_does_not_shrink_the_next_sessions_window() -> None:
    def handler(request: RecordedRequest) -> ScriptedReply:
        tokens = len(json.dumps(request.body)) // 4
        if "refused-" in json.dumps(request.body) and tokens > PROVIDER_LIMIT:
            return ErrorReply("context_overflow", prompt_tokens=tokens * OVERCOUNT, limit=PROVIDER_LIMIT)
        return f"ok {NONCE}"

    store = MemoryBlobStore()
    with ScriptedLLMServer(handler=handler) as server:
        client = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0))
        refused = ContextManager(MODEL, store=store, session_id="refused-a")
        refused.add([{**m, "content": f"refused-{m['content']}"} for m in _history(12)])
        client.chat(refused, model=MODEL)
        assert server.requests[0].status == 400
        assert refused.learned_limit is not None  # the refused session keeps what its error said
        fresh = ContextManager(MODEL, store=store, session_id="fresh-b")
        fresh.add(_history(2))
        client.chat(fresh, model=MODEL)  # on 8c274dd: InsufficientBudget, before any request
        assert server.requests[-1].status == 200
        sent = json.dumps(server.requests[-1].body)
        assert sent.count(f"{NONCE} q") == 2  # the fresh session's two turns went whole
        # The model's limit under the bounded factor (its thresholds: 1,824 tokens here); 382 on 8c274dd. Since s19h
        # a limit under 1/16 of the configured window stays with the session that met it: none is shared here.
        assert fresh.learned_limit is None or fresh.learned_limit >= PROVIDER_LIMIT / SHARED_RATIO_MAX * 0.7
