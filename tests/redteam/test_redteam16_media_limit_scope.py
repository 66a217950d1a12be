"""A refusal for size that names no limit, of a small request, strips no other caller of its images (red team 16).

Found by the sixteenth red team. On 309338f a ``413`` naming no limit, for a request carrying an image, taught a
byte limit 15% under the refused request, kept in the store for the model: through the proxy (one store for every
caller), one caller's request of a few screenshots refused so (a gateway's quota, a lying server) made every other
caller's screenshots be replaced by a note, for good. No body limit in front of an LLM API is under nginx's default
1 MiB: such a limit of a smaller request is now kept by the manager that met it (the refused request is still
retried within it), not stored for the model.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import httpx

from contextfold import ContextManager
from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import ErrorReply, RecordedRequest, ScriptedLLMServer
from contextfold.testing.server import ScriptedReply

NONCE = "rt16-media-Jd2k"
MODEL = "gpt-4o-mini"


def _screenshot(step: int) -> dict[str, Any]:
    data = base64.b64encode(f"PNG-{NONCE}-{step}-".encode() * 1_500).decode()
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}


def _images(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if isinstance(m.get("content"), list)
               for part in m["content"] if part.get("type") == "image_url")


def test_one_callers_small_413_does_not_strip_another_callers_images() -> None:
    def handler(request: RecordedRequest) -> ScriptedReply:
        if "caller-a" in request.headers.get("authorization", "") and _images(request.body) > 1:
            return ErrorReply.request_too_large()
        return f"ok {NONCE}"

    with ScriptedLLMServer(handler=handler) as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url,
                             sessions="memory", store="memory", archive="memory", windows={MODEL: 60_000},
                             log_level="critical")
        with ProxyServer(config) as proxy, httpx.Client(base_url=proxy.url, timeout=30) as client:
            def send(key: str, label: str) -> httpx.Response:
                messages = [{"role": "user", "content": [{"type": "text", "text": f"{label} step {s} {NONCE}"},
                                                         _screenshot(s)]} for s in range(3)]
                return client.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                                   json={"model": MODEL, "messages": messages})

            assert send("sk-caller-a", "a").status_code == 200  # recovered: the older screenshots went
            assert _images(upstream.requests[-1].body) == 1
            assert send("sk-caller-b", "b").status_code == 200
            assert _images(upstream.requests[-1].body) == 3  # every screenshot of the other caller went out


def test_a_named_or_large_refusal_is_still_learned_for_the_model() -> None:
    store = "memory"
    first = ContextManager(MODEL, max_context_tokens=60_000, store=store, session_id="m-a")
    assert first.cache is not None
    blobs = first.cache.store
    first.learn_media_limit(max_bytes=2_000_000)  # (shared: what recovery teaches from a named limit)
    second = ContextManager(MODEL, max_context_tokens=60_000, store=blobs, session_id="m-b")
    assert second.media_limits.max_bytes == 2_000_000
    first.learn_media_limit(max_bytes=9_000, shared=False)
    assert first.media_limits.max_bytes == 9_000
    third = ContextManager(MODEL, max_context_tokens=60_000, store=blobs, session_id="m-c")
    assert third.media_limits.max_bytes == 2_000_000
