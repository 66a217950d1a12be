"""A streaming client that goes before the first event must not keep its session locked (issue 21, red team).

The relay gives the session's lock back in its own ``finally``, but a generator that never started never runs it:
when the client's connection is gone before ``http.response.start`` is sent (ASGI 2.4 servers report it as an
``OSError`` from ``send``), the lock stayed held and every later request of the session on this instance waited
forever. The app is driven through ASGI directly, so the disconnect happens exactly there; the upstream is the
scripted server on loopback.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

from _serve_support import MODEL, proxy_config

from contextfold.serve.app import ServeApp
from contextfold.serve.identity import SESSION_HEADER
from contextfold.testing import ScriptedLLMServer


def _scope(body: bytes) -> dict[str, Any]:
    headers = [(b"content-type", b"application/json"), (b"authorization", b"Bearer sk-test"),
               (SESSION_HEADER.encode(), b"gone-early"), (b"content-length", str(len(body)).encode())]
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
            "query_string": b"", "root_path": "", "headers": headers, "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000)}


async def _call(app: ServeApp, body: dict[str, Any], *, gone: bool) -> list[dict[str, Any]]:
    raw = json.dumps(body).encode()
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await asyncio.Event().wait()  # (the client never sends more; the app does not ask before it ends)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if gone and message["type"] == "http.response.start":
            raise OSError("the client's connection is gone")
        sent.append(message)

    try:
        await app.app(_scope(raw), receive, send)
    except Exception as exc:  # Starlette turns the OSError into ClientDisconnect
        assert gone, exc
    return sent


def test_a_client_gone_before_the_first_event_leaves_the_session_unlocked() -> None:
    with ScriptedLLMServer(default="ok") as upstream:
        app = ServeApp(proxy_config(upstream))

        async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            try:
                messages = [{"role": "user", "content": "Find why the parser fails on empty input."}]
                await _call(app, {"model": MODEL, "messages": messages, "stream": True}, gone=True)
                locks = dict(app.locks._locks)
                # The session's next request is served (with the lock kept, it waited forever: bounded here).
                sent = await asyncio.wait_for(_call(app, {"model": MODEL, "messages": messages}, gone=False), 30)
                return locks, sent
            finally:
                await app.aclose()

        locks, sent = asyncio.run(scenario())
    assert locks == {}  # the session's lock was given back
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    assert json.loads(b"".join(m.get("body", b"") for m in sent[1:]))["choices"][0]["message"]["content"] == "ok"
    assert len(upstream.requests) == 2
