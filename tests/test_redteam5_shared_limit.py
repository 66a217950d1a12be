"""Red team (issue 21 §2/§4): one caller of the proxy sets the learned limit of every other caller.

A learned provider limit is kept in the blob store per model (``limit:<model>``), for every session on the store;
the proxy's callers (different API keys, sessions scoped apart) share one store. Recovery learns the input the
error leaves beside the request's own ``max_tokens``: one Anthropic request asking ``max_tokens`` close to the
window (a mistake, or on purpose) teaches a limit of a few dozen tokens, and another caller's ordinary 600-token
request is then refused by the proxy ("a 75-token budget"), on every instance sharing the store, for good. Found on
5894f4b.
"""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import httpx

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import ScriptedLLMServer

MODEL = "claude-haiku-4-5"
WINDOW = 20_000


def test_a_callers_max_tokens_does_not_shrink_another_callers_window() -> None:
    with ScriptedLLMServer(context_window=WINDOW, validator="formats", default="ok") as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url,
                             sessions="memory", store="memory", archive="memory", windows={MODEL: WINDOW},
                             log_level="warning")
        with ProxyServer(config) as proxy, httpx.Client(base_url=proxy.url, timeout=30) as client:
            def send(key: str, max_tokens: int, text: str) -> httpx.Response:
                return client.post("/v1/messages", headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
                                   json={"model": MODEL, "max_tokens": max_tokens,
                                         "messages": [{"role": "user", "content": text}]})

            greedy = send("sk-caller-a", WINDOW - 200, "hi " * 400)
            assert greedy.status_code == 400  # the request cannot fit: the caller is told so
            ordinary = send("sk-caller-b", 1_024, "please review the logs carefully " * 100)
            assert ordinary.status_code == 200, ordinary.text
            assert upstream.requests[-1].body["messages"][0]["content"].startswith("please review")
