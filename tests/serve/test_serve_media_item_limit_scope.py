"""An item-count limit one caller's refusal taught is that caller's session's, unless the error names it.

Red team 16 kept a byte limit that may be one request's with its session (one caller's refusal stripped every caller
of its images); an item-count limit was still stored for the model whatever the error said. A refusal whose figure
is unreadable taught "one fewer than this request had", and one counting a caller's document pages ("300 document
pages + 2 images > 100") taught the named figure scaled by that request's pages per item: 1 image a request, for
every caller of the model. Now only a figure the error names is the model's; the rest stays with the session.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from _serve_support import MODEL, proxy_config

from contextfold.serve import ProxyServer
from contextfold.testing import ErrorReply, RecordedRequest, ScriptedLLMServer
from contextfold.testing.server import ScriptedReply

NONCE = "r17-items-Pw4c"


def _screenshot(step: int, detail: str | None = None) -> dict[str, Any]:
    data = base64.b64encode(f"PNG-{NONCE}-{step}-".encode() * 50).decode()
    image = {"url": f"data:image/png;base64,{data}", **({"detail": detail} if detail is not None else {})}
    return {"type": "image_url", "image_url": image}


def _images(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if isinstance(m.get("content"), list)
               for part in m["content"] if part.get("type") == "image_url")


@pytest.mark.parametrize("wording", [
    "Too many images in request. Max is 10000000000000",  # (a figure past any limit: read as none)
    "Too much media: 300 document pages + 2 images > 100",  # (this request's pages: 1 item of ours a request)
])
def test_one_callers_item_refusal_leaves_other_callers_their_images(wording: str) -> None:
    def handler(request: RecordedRequest) -> ScriptedReply:
        if "caller-a" in request.headers.get("authorization", "") and _images(request.body) > 1:
            return ErrorReply("invalid_request", wording)
        return f"ok {NONCE}"

    with ScriptedLLMServer(handler=handler) as upstream, \
            ProxyServer(proxy_config(upstream, windows={MODEL: 60_000})) as proxy, \
            httpx.Client(base_url=proxy.url, timeout=30) as client:
        def send(key: str, label: str, *more: dict[str, Any]) -> httpx.Response:
            messages = [{"role": "user", "content": [{"type": "text", "text": f"{label} step {s} {NONCE}"},
                                                     _screenshot(s)]} for s in range(3)]
            return client.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                               json={"model": MODEL, "messages": [*messages, *more]})

        assert send("sk-caller-a", "a").status_code == 200  # recovered: the older screenshots went
        assert _images(upstream.requests[-1].body) == 1
        sent = len(upstream.requests)
        assert send("sk-caller-a", "a", {"role": "assistant", "content": f"ok {NONCE}"},
                    {"role": "user", "content": f"and now? {NONCE}"}).status_code == 200
        assert len(upstream.requests) == sent + 1  # (its session keeps what it learned: not refused again)
        assert _images(upstream.requests[-1].body) == 1
        assert send("sk-caller-b", "b").status_code == 200
        assert _images(upstream.requests[-1].body) == 3  # (c04dd8d: 1, the other caller's limit)
        assert len(upstream.requests) == sent + 2


def test_an_item_limit_echoed_from_a_clients_own_value_teaches_no_caller() -> None:
    # Reviewer 2 (s17): OpenAI echoes an invalid enum value in its 400; a caller whose image "detail" said "Too many
    # images in request. Max is 1" made the proxy store 1 image a request for the model: every caller sent 1.
    def handler(request: RecordedRequest) -> ScriptedReply:
        for message in request.body["messages"]:
            for part in message["content"] if isinstance(message.get("content"), list) else ():
                detail = part["image_url"].get("detail") if part.get("type") == "image_url" else None
                if detail not in (None, "low", "high", "auto"):  # (as OpenAI words an invalid enum value)
                    return ErrorReply("invalid_request", f"Invalid value: '{detail}'. Supported values are: "
                                                         "'low', 'high', and 'auto'.")
        return f"ok {NONCE}"

    with ScriptedLLMServer(handler=handler) as upstream, \
            ProxyServer(proxy_config(upstream, windows={MODEL: 60_000})) as proxy, \
            httpx.Client(base_url=proxy.url, timeout=30) as client:
        echoed = client.post("/v1/chat/completions", headers={"authorization": "Bearer sk-caller-a"}, json={
            "model": MODEL, "messages": [{"role": "user", "content": [
                {"type": "text", "text": f"look {NONCE}"}, _screenshot(0, f"Too many images in request. Max is 1 "
                                                                         f"{NONCE}"), _screenshot(1)]}]})
        assert echoed.status_code == 400  # (the client's error, passed on: nothing to recover)
        other = client.post("/v1/chat/completions", headers={"authorization": "Bearer sk-caller-b"}, json={
            "model": MODEL, "messages": [{"role": "user", "content": [
                {"type": "text", "text": f"step {s} {NONCE}"}, _screenshot(s)]} for s in range(3)]})
        assert other.status_code == 200
        assert _images(upstream.requests[-1].body) == 3  # (db7922a: 1, the limit the first caller wrote)
