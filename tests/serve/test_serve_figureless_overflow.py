"""An upstream answering "too long" without figures to every request does not make the proxy refuse the session.

On afa4c7c the first request's recovery shrank the session's learned limit to ~65 tokens (three figureless answers,
15%, 30% and 50% below each rejected request), and every later request of the session was refused by the proxy
itself (400 "contextfold cannot fit this conversation in the window"), never reaching the upstream, even once the
upstream answered again. Now the limit inferred from such answers stops at 1/16 of the window (and at what must
stay): each request reaches the upstream, the client gets the provider's own answer, and the session works as soon
as the upstream does. Real proxy and scripted upstream on loopback.
"""

from __future__ import annotations

import uuid

import openai
import pytest
from _serve_support import MODEL, proxy_config

from contextfold.serve import ProxyServer
from contextfold.testing import ScriptedLLMServer
from contextfold.testing.wire import ErrorReply

WORDING = "Your input exceeds the context window of this model."


def test_a_session_refused_without_figures_keeps_asking_the_upstream_and_recovers_when_it_answers() -> None:
    refused = ErrorReply("context_overflow", message=WORDING)
    with ScriptedLLMServer([], default=refused) as upstream, ProxyServer(proxy_config(upstream)) as proxy:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="t", max_retries=0)
        messages = [{"role": "system", "content": "You are a coding agent."},
                    {"role": "user", "content": f"Task {uuid.uuid4().hex[:8]}: fix the parser."}]
        for k in range(40):
            messages += [{"role": "assistant", "content": f"step {k} " + "word " * 60},
                         {"role": "user", "content": f"go on {k}"}]
        for turn in range(4):
            asked = len(upstream.requests)
            with pytest.raises(openai.BadRequestError) as failed:
                client.chat.completions.create(model=MODEL, messages=messages)
            assert WORDING in str(failed.value)  # the provider's answer (afa4c7c: the proxy's own, from turn 1)
            assert len(upstream.requests) > asked  # afa4c7c: 0 from the second request on
            messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": f"again {turn}"}]
        upstream.default = "answered"
        reply = client.chat.completions.create(model=MODEL, messages=messages)
    assert reply.choices[0].message.content == "answered"
