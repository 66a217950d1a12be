"""A provider below the configured window whose overflow error names no limit is met once per session.

Red team 16 kept such a limit with the manager that learned it (stored for the model, one caller's refusal shrank
every caller's window). The proxy builds a manager per request, so the session's next request had forgotten it: its
view grew back past the provider's limit and was refused again, over and over (40 turns: 12 refusals in 52 upstream
calls). The session's own record keeps it for the session's later requests, and for no other caller.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import httpx

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import ErrorReply, RecordedRequest, ScriptedLLMServer
from contextfold.testing.server import ScriptedReply

NONCE = "f1-figureless-Rk2p"
MODEL = "gpt-4o-mini"
WINDOW = 16_000
UPSTREAM_LIMIT_CHARS = 12_000  # the upstream's real limit: far below what the window lets the proxy send
FIGURELESS = "Your input exceeds the context window of this model. Please adjust your input and try again."
TURNS = 11


def test_a_sessions_figureless_limit_is_met_once_and_no_other_caller_shrinks() -> None:
    refusals: list[str] = []

    def handler(request: RecordedRequest) -> ScriptedReply:
        if len(json.dumps(request.body["messages"])) > UPSTREAM_LIMIT_CHARS:
            refusals.append(request.headers.get("authorization", ""))
            return ErrorReply("context_overflow", message=FIGURELESS)
        return f"ok {NONCE}"

    with ScriptedLLMServer(handler=handler) as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url,
                             sessions="memory", store="memory", archive="memory", windows={MODEL: WINDOW},
                             log_level="critical")
        with ProxyServer(config) as proxy, httpx.Client(base_url=proxy.url, timeout=60) as client:
            history: list[dict[str, str]] = [{"role": "system", "content": f"Be brief. {NONCE}"}]
            for turn in range(TURNS):
                history.append({"role": "user", "content": f"turn {turn} {NONCE} " + "lorem ipsum dolor " * 90})
                reply = client.post("/v1/chat/completions", headers={"authorization": "Bearer sk-f1-a"},
                                    json={"model": MODEL, "messages": history})
                assert reply.status_code == 200, reply.text
                history.append({"role": "assistant", "content": f"ok {NONCE}"})
            assert len(refusals) == 1, refusals  # (6f2b645: once each time the view grew back past the limit)
            # Another caller's request, small enough for the provider, goes out whole: nothing was stored for it.
            other = [{"role": "user", "content": f"another caller {NONCE} " + "review this " * 400}]
            reply = client.post("/v1/chat/completions", headers={"authorization": "Bearer sk-f1-b"},
                                json={"model": MODEL, "messages": other})
            assert reply.status_code == 200, reply.text
            assert upstream.requests[-1].body["messages"][-1]["content"].count("review this") == 400
