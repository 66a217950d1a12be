"""A chunk the SDK's accumulator cannot read must not cut the caller's stream in the OpenAI wrapper.

Found by the twelfth red team: an OpenAI-compatible server's tool-call delta with ``"index": null``. Iterating the
SDK's stream alone yields every chunk; through ``wrap_openai(...).chat(cm, stream=True)`` the wrapper's collector
(the SDK's ``ChatCompletionStreamState``) raised ``TypeError`` at that chunk and the caller got 1 of 3 chunks. Now
every chunk is passed through and the end of the stream raises ``IncompleteStream`` saying the reply could not be
assembled (nothing half-read is added to the history), as a stream cut short does.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from contextfold.errors import IncompleteStream
from contextfold.integrations.openai_client import wrap_openai
from contextfold.manager import ContextManager

NONCE = "rt12-wrapped-9Pe2"


def _upstream(request: httpx.Request) -> httpx.Response:
    delta = {"tool_calls": [{"index": None, "id": "t1", "type": "function",
                             "function": {"name": "f", "arguments": "{}"}}]}
    chunks = [{"role": "assistant", "content": NONCE}, delta, {}]
    body = b"".join(b"data: " + json.dumps({
        "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "delta": d, "finish_reason": "tool_calls" if k == 2 else None}]}).encode() + b"\n\n"
        for k, d in enumerate(chunks)) + b"data: [DONE]\n\n"
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


def test_every_chunk_reaches_the_caller_and_the_end_says_the_reply_was_not_added() -> None:
    client = openai.OpenAI(api_key="k", base_url="http://upstream.test/v1", max_retries=0,
                           http_client=httpx.Client(transport=httpx.MockTransport(_upstream)))
    cm = ContextManager("gpt-4o", store="memory")
    cm.add([{"role": "user", "content": f"go {NONCE}"}])
    seen = []
    stream = wrap_openai(client).chat(cm, model="gpt-4o", stream=True)
    with pytest.raises(IncompleteStream, match="could not be assembled"):
        for chunk in stream:
            seen.append(chunk)
    assert len(seen) == 3
    assert [m.role for m in cm.messages()] == ["user"]
