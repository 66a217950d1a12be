"""One scripted upstream and one proxy per test module (both real HTTP servers on 127.0.0.1), reused by its tests.

Tests tell their sessions apart by their opening message (the proxy's fingerprint) or the session header, and read
what reached the upstream from ``upstream.requests`` after the count they noted before. Not a ``conftest.py``: a
second module named ``conftest`` shadows the root one that other tests import from; modules import the fixtures
they use (``upstream_fixture`` registers ``upstream``, and so on).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.serve.app import ServeApp
from contextfold.serve.identity import caller_scope, session_id
from contextfold.serve.runner import _server
from contextfold.serve.sessions import resolve_pointer
from contextfold.testing import ScriptedLLMServer
from contextfold.testing.services import RedisServer


class Clock:
    """A clock the test sets (``clock.now = ...``): the proxy's leases, claims and collection read it, so a test moves
    time instead of sleeping."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def shared_clock(proxies: Sequence[ProxyServer], monkeypatch: pytest.MonkeyPatch,
                 now: float = 1_000_000_000.0) -> Clock:
    """One settable clock for the backends of ``proxies`` (their leases, claims and collection read it)."""
    clock = Clock(now)
    for proxy in proxies:
        monkeypatch.setattr(proxy.serve_app.backend, "clock", clock)
    return clock


# The proxy works in this window; the upstream refuses anything over UPSTREAM_WINDOW (a bit larger: our count and
# the scripted server's differ a little, and the tests check the proxy keeps every request within its own window).
WINDOW = 6_000
UPSTREAM_WINDOW = 8_000
MODEL = "gpt-4o-mini"
# The key salt of the two-instance modules (``instances``): their callers' sessions are named under it.
LEASE_SALT = "lease-test-salt"


def proxy_config(upstream: ScriptedLLMServer, **overrides: Any) -> ServeConfig:
    options: dict[str, Any] = {"port": 0, "openai_base_url": upstream.base_url, "anthropic_base_url": upstream.url,
                               "sessions": "memory", "store": "memory", "archive": "memory",
                               "windows": {MODEL: WINDOW, "claude-haiku-4-5": WINDOW}, "log_level": "warning"}
    options.update(overrides)
    return ServeConfig(**options)


@pytest.fixture(scope="module", name="upstream")
def upstream_fixture() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=UPSTREAM_WINDOW, validator="formats") as server:
        yield server


@pytest.fixture(scope="module", name="upstream")
def replying_upstream_fixture() -> Iterator[ScriptedLLMServer]:
    """The module's upstream (as ``upstream_fixture``) answering a few words to whatever it is not told."""
    with ScriptedLLMServer(default="a scripted reply of several words", context_window=UPSTREAM_WINDOW,
                           validator="formats") as server:
        yield server


@pytest.fixture(scope="module", name="proxy")
def proxy_fixture(upstream: ScriptedLLMServer) -> Iterator[ProxyServer]:
    with ProxyServer(proxy_config(upstream)) as server:
        yield server


@pytest.fixture(name="opening")
def opening_fixture() -> str:
    """A task statement no other test uses: a session of its own."""
    return f"Task {uuid.uuid4().hex[:8]}: find why the parser fails on empty input."


@pytest.fixture(scope="module", name="instances", params=["local", "redis"])
def instances_fixture(request: pytest.FixtureRequest, upstream: ScriptedLLMServer,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ProxyServer]]:
    """Two proxy instances over one shared store: SQLite files and a blob directory, or a redis-server.

    Over the module's ``upstream`` fixture (each module scripts its own), with ``LEASE_SALT``.
    """
    from conftest import require_binary

    state = tmp_path_factory.mktemp("state")
    if request.param == "local":
        config = proxy_config(upstream, key_salt=LEASE_SALT, sessions="local", store="local", state_dir=str(state),
                              archive=str(Path(state) / "archive"))
        with ProxyServer(config) as one, ProxyServer(config) as two:
            yield [one, two]
        return
    with RedisServer(tmp_path_factory.mktemp("redis"), binary=require_binary("redis-server")) as redis:
        config = proxy_config(upstream, key_salt=LEASE_SALT, sessions=redis.url, store=redis.url,
                              state_dir=str(state))
        with ProxyServer(config) as one, ProxyServer(config) as two:
            yield [one, two]


@contextlib.contextmanager
def application_logging(handler: logging.Handler, *, propagate: bool = True) -> Iterator[None]:
    """``handler`` on the root logger at INFO, as an application sets one up, and ``contextfold.serve`` with no
    handler of its own (``propagate``: as the application left it); everything put back after."""
    root, serve = logging.getLogger(), logging.getLogger("contextfold.serve")
    saved = root.level, serve.handlers[:], serve.propagate, serve.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    serve.handlers[:], serve.propagate = [], propagate
    serve.setLevel(logging.NOTSET)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(saved[0])
        serve.handlers[:], serve.propagate = saved[1], saved[2]
        serve.setLevel(saved[3])


class ProxyLines(logging.Handler):
    """An application's own handler: the proxy's records it was handed as (message, fields, whether on an event loop,
    the thread)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen: list[tuple[str, dict[str, Any], bool, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        if not record.name.startswith("contextfold.serve"):
            return  # (httpx's own lines, and the test client's)
        fields = dict(getattr(record, "fields", None) or {})
        self.seen.append((record.getMessage(), fields, on_loop, threading.current_thread().name))


class HostServer(ProxyServer):
    """A host application holding the proxy (``host(serve_app)`` makes it: a mount, say) on a free port of 127.0.0.1;
    ``serve_app`` is the proxy inside. Started and stopped as ``ProxyServer`` (uvicorn runs the host's lifespan)."""

    def __init__(self, config: ServeConfig, host: Callable[[ServeApp], Any]) -> None:
        super().__init__(config)
        self._server = _server(config, host(self.serve_app))


class RawUpstream:
    """An upstream on loopback answering every POST with 200 and what ``answer(path)`` gives: (content type, parts).

    One part goes with a content-length; more go chunked, and with ``gate`` set, the rest wait for the test to set it
    after the first (an upstream still sending). For answers the scripted server does not give (it streams every 200
    of a stream request): a JSON body to a stream request, say. ``with RawUpstream(answer) as upstream:``.
    """

    def __init__(self, answer: Callable[[str], tuple[str, Sequence[bytes]]],
                 gate: threading.Event | None = None) -> None:
        self.answer, self.gate = answer, gate
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                content_type, parts = upstream.answer(self.path)
                self.send_response(200)
                self.send_header("content-type", content_type)
                if len(parts) == 1:
                    self.send_header("content-length", str(len(parts[0])))
                    self.end_headers()
                    self.wfile.write(parts[0])
                    return
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for n, part in enumerate(parts):
                    if n == 1 and upstream.gate is not None:
                        upstream.gate.wait(60)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> RawUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.gate is not None:
            self.gate.set()  # (a handler still waiting: let it end)
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@contextlib.contextmanager
def proxy_of(upstream: RawUpstream, **overrides: Any) -> Iterator[ProxyServer]:
    """A proxy in front of ``upstream`` (memory stores; gpt-4o-mini and claude-haiku-4-5 in a 6,000-token window)."""
    options: dict[str, Any] = {"port": 0, "openai_base_url": upstream.url + "/v1", "anthropic_base_url": upstream.url,
                               "sessions": "memory", "store": "memory", "archive": "memory",
                               "windows": {"gpt-4o-mini": 6_000, "claude-haiku-4-5": 6_000}, "log_level": "warning"}
    options.update(overrides)
    with ProxyServer(ServeConfig(**options)) as proxy:
        yield proxy


class ResponsesCaller:
    """A caller of the two-instance modules (``instances``, under ``LEASE_SALT``): its Responses requests by its key,
    and the sessions its responses belong to. ``wait_s``: how long a request may take (a failure, not a pace)."""

    def __init__(self, key: str, wait_s: float = 10.0) -> None:
        self.key, self.wait_s = key, wait_s
        self.headers = {"authorization": f"Bearer {key}"}

    def post(self, proxy: ProxyServer, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(proxy.url + "/v1/responses", json={"model": MODEL, **body}, headers=self.headers,
                          timeout=self.wait_s)

    def session_of(self, proxy: ProxyServer, response_id: str) -> str:
        found = resolve_pointer(proxy.serve_app.backend,
                                session_id(caller_scope(self.key, LEASE_SALT), "response", response_id))
        assert found is not None, response_id
        return found


class StreamReader(threading.Thread):
    """A client reading a Responses stream of ``caller``'s on a thread: each data event into ``events``, ``relayed``
    set at each (the scripted upstream's ``stream_pause`` holds the stream after its first)."""

    def __init__(self, caller: ResponsesCaller, proxy: ProxyServer, body: dict[str, Any]) -> None:
        super().__init__()
        self.caller, self.proxy, self.body = caller, proxy, {"model": MODEL, "stream": True, **body}
        self.relayed = threading.Event()
        self.events: list[Any] = []

    def run(self) -> None:
        with httpx.stream("POST", self.proxy.url + "/v1/responses", json=self.body, headers=self.caller.headers,
                          timeout=self.caller.wait_s) as answer:
            for line in answer.iter_lines():
                if line.startswith("data:"):
                    self.events.append(json.loads(line[5:]))
                    self.relayed.set()


class ChatConversation:
    """A Chat Completions client resending its whole history (``history``) through ``proxy`` each turn."""

    def __init__(self, proxy: ProxyServer, upstream: ScriptedLLMServer, history: list[dict[str, Any]]) -> None:
        self.proxy, self.upstream, self.history = proxy, upstream, history

    def turn(self, reply: Any, text: str) -> httpx.Response:
        """The upstream told ``reply`` (one or a list), the history sent, the answer and ``text`` added to it."""
        self.upstream.push(*reply) if isinstance(reply, list) else self.upstream.push(reply)
        answer = httpx.post(self.proxy.url + "/v1/chat/completions", timeout=30,
                            json={"model": MODEL, "messages": self.history})
        assert answer.status_code == 200, answer.text
        self.history.extend([answer.json()["choices"][0]["message"], {"role": "user", "content": text}])
        return answer
