"""Red team (issue 21 §4/§5): model names a client sends to the proxy.

The name is looked up in the model registry, which remembers every name it resolved (``_RESOLVED``), and a refused
one is echoed in the error and the log line. A 2 MB model name was accepted as a name: 20 refused requests left
77 MB in the process (tracemalloc, 5894f4b), and each refusal logged the whole name.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import httpx

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import ScriptedLLMServer


def test_an_overlong_model_name_is_refused_and_not_kept() -> None:
    with ScriptedLLMServer(default="ok") as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url,
                             sessions="memory", store="memory", archive="memory", log_level="critical")
        with ProxyServer(config) as proxy, httpx.Client(base_url=proxy.url + "/v1", timeout=60) as client:
            gc.collect()
            tracemalloc.start()
            try:
                for i in range(5):
                    reply = client.post("/chat/completions", headers={"authorization": "Bearer sk-test"},
                                        json={"model": f"m{i}-" + "x" * 1_000_000,
                                              "messages": [{"role": "user", "content": "hi"}]})
                    assert reply.status_code == 400
                    assert len(reply.content) < 2_000  # the name is not echoed whole
                gc.collect()
                kept = tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
    assert reply.json()["error"]["param"] == "model"
    assert kept < 5_000_000, f"{kept / 1e6:.1f} MB kept after 5 refused requests"
    assert upstream.requests == []


def test_the_registry_does_not_keep_every_name_it_was_asked_for() -> None:
    from contextfold.tokens import models

    before = len(models._RESOLVED)
    for i in range(3_000):
        models.lookup_model(f"in-house-model-{i}", with_prices=False)
    assert len(models._RESOLVED) - before < 2_000
