"""Request bodies of the wrong shape get the API's 400 naming the field, never an internal error (red team 16).

Found by the sixteenth red team over real HTTP on loopback (a scripted upstream behind the proxy). On 309338f:
a Chat tool whose ``function`` is no object, or whose name is a list, was a 500 (the proxy reads tool names to know
whether the model has the retrieval tools, and which of them the client declared itself); ``stream_options`` that
is no object on a Chat stream was a 500 (the proxy adds ``include_usage`` to it); ``tools`` that is no list was a
500 with the retrieval tools on (the proxy extends it), and forwarded as characters or keys when it was a string or
an object; a body nested past the JSON reader's depth
(RecursionError) or 900 levels deep (the proxy's own walks of a body recurse) was Starlette's plain-text
"Internal Server Error" with a traceback in the log, not the API's error shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import httpx

from contextfold.formats._common import MAX_NESTING
from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import ScriptedLLMServer

NONCE = "rt16-bodies-8Kq2"
MODEL = "gpt-4o-mini"
CLAUDE = "claude-haiku-4-5"
CHAT, MESSAGES, RESPONSES = "/v1/chat/completions", "/v1/messages", "/v1/responses"
KEY = {"authorization": "Bearer sk-rt16-bodies", "x-api-key": "sk-rt16-bodies"}


@pytest.fixture(scope="module", name="proxy", params=[False, True], ids=["plain", "retrieval"])
def proxy_fixture(request: pytest.FixtureRequest) -> Iterator[ProxyServer]:
    with ScriptedLLMServer(context_window=8_000, default=f"ok {NONCE}") as upstream, ProxyServer(ServeConfig(
            port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url, sessions="memory",
            store="memory", archive="memory", windows={MODEL: 6_000, CLAUDE: 6_000}, log_level="critical",
            retrieval_tools=request.param)) as server:
        yield server


def _post(proxy: ProxyServer, path: str, content: bytes) -> httpx.Response:
    return httpx.post(proxy.url + path, content=content, headers={**KEY, "content-type": "application/json"},
                      timeout=30)


def _chat(**fields: Any) -> bytes:
    return json.dumps({"model": MODEL, "messages": [{"role": "user", "content": f"hi {NONCE}"}], **fields}).encode()


def _nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


BAD_BODIES: dict[str, tuple[str, bytes, str | None]] = {
    # name: (path, body, the field the error names)
    "tool function a number": (CHAT, _chat(tools=[{"type": "function", "function": 5}]), None),
    "tool name a list": (CHAT, _chat(tools=[{"type": "function", "function": {"name": [], "parameters": {}}}]), None),
    "stream_options a number": (CHAT, _chat(stream=True, stream_options=5), "stream_options"),
    "stream_options a list": (CHAT, _chat(stream=True, stream_options=[1]), "stream_options"),
    "tools a number": (CHAT, _chat(tools=5), "tools"),
    "tools an object": (CHAT, _chat(tools={"a": {"type": "function"}}), "tools"),
    "responses tools a string": (RESPONSES, json.dumps({"model": MODEL, "input": NONCE, "tools": "f"}).encode(),
                                 "tools"),
    "messages tools a number": (MESSAGES, json.dumps({"model": CLAUDE, "max_tokens": 10, "tools": 7, "messages": [
        {"role": "user", "content": NONCE}]}).encode(), "tools"),
    "900 levels in a message": (CHAT, b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x","extra":'
                                + _nested(900) + b"}]}", "messages[0]"),
    "900 levels in the opening's content": (CHAT, b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":'
                                            + b"[" * 900 + b"]" * 900 + b"}]}", "messages[0]"),
    "100000 levels": (CHAT, b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":' + b"[" * 100_000
                      + b"]" * 100_000 + b"}]}", None),
    "deep tools": (MESSAGES, b'{"model":"claude-haiku-4-5","max_tokens":10,"messages":[{"role":"user","content":"x"}],'
                   b'"tools":[{"name":"f","input_schema":' + _nested(500) + b"}]}", "tools[0]"),
    "deep under a key of the client's": (CHAT, b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],'
                                         b'"Kx9vQ7mZp2Wt":' + _nested(500) + b"}", "body"),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_a_body_of_the_wrong_shape_is_a_400_naming_the_field(proxy: ProxyServer, name: str) -> None:
    path, content, field = BAD_BODIES[name]
    answer = _post(proxy, path, content)
    if name.startswith("tool "):  # (the provider judges the tools it is sent: the proxy reads them safely)
        assert answer.status_code == 200, answer.text
        return
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert "internal error" not in error["message"]
    if field is not None:
        assert error["message"].startswith(field + ":"), error["message"]
        assert "Kx9vQ7mZp2Wt" not in answer.text  # (a key of the client's is not repeated: it may be a secret)
    if path != MESSAGES and field is not None:
        assert error["param"].startswith(field)


def test_the_body_nesting_bound_keeps_what_the_formats_take(proxy: ProxyServer) -> None:
    """A message nested as deep as the manager accepts still goes through (the bound is above it)."""
    depth = MAX_NESTING - 2  # body -> messages -> item -> extra -> ...: as deep as the formats take an item
    content = (b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"' + NONCE.encode() + b' deep",'
               b'"metadata_' + NONCE.encode() + b'":' + _nested(depth) + b"}]}")
    answer = _post(proxy, CHAT, content)
    assert answer.status_code == 200, answer.text
