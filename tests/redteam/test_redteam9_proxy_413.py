"""A text-only agent behind a proxy that caps the request body (nginx answers 413 over 1 MB by default).

Found by review9: since media limits, a 413 is read as a media refusal; for a request without any image or document
recovery had nothing to take out and gave up with ``RecoveryFailed`` "the provider refused the request's media (0
images and documents, 0 bytes inline)" (before media limits the 413 was not recovered either). The request's text is
what is too large: it is recovered as a context overflow of unknown limit (compacted, the ceiling learned).
"""

from __future__ import annotations

import uuid

import openai

from contextfold.manager import ContextManager
from contextfold.recovery import call_with_recovery
from contextfold.testing.server import ScriptedLLMServer

NONCE = uuid.uuid4().hex[:8]


def test_a_413_for_a_request_without_media_is_recovered_by_compacting() -> None:
    # (A 16K window: a refusal naming no limit never shrinks a session under 1/16 of its window, and this body limit
    # of 12 KB, ~4.5K tokens, is under 1/16 of gpt-4o's 128K; real ones are 1 MB and more, MIN_UNNAMED_BODY_LIMIT.)
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory")
    cm.add({"role": "system", "content": "You are a coding agent."})
    cm.add({"role": "user", "content": f"Read the logs and fix the build ({NONCE})."})
    for k in range(8):
        call_id = f"call-{k}-{NONCE}"
        cm.add({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "read_log", "arguments": f'{{"part": {k}}}'}}]})
        lines = "\n".join(f"{NONCE} step {k} line {i}: compiling module_{k}_{i}.c ok" for i in range(40))
        cm.add({"role": "tool", "tool_call_id": call_id, "content": lines})
    with ScriptedLLMServer(default="Fixed.", max_request_bytes=12_000) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        reply = call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
        assert reply.choices[0].message.content == "Fixed."
        statuses = [r.status for r in server.requests]
        assert statuses[0] == 413 and statuses[-1] == 200
    assert cm.media_limits.max_items is None  # nothing about images was learned from it
