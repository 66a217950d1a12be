"""A stream request answered with status 200 and a JSON error body reaches the client's SDK as an error.

Some gateways answer ``stream: true`` with 200, ``application/json`` and ``{"error": ...}``. base19 relayed that
body as the stream's bytes: the SDKs read events only, found none, and returned an empty stream without raising (an
agent took it for a reply with nothing in it). It is now the stream's error event, as for an error that opens a
200 event stream; an overflow in it is still recovered first (tests/redteam/test_redteam12_serve_error_in_200.py).

The upstream is a real HTTP server on loopback (the scripted server streams every 200 of a stream request).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import openai
import pytest

from contextfold.serve import ProxyServer, ServeConfig

QUOTA = {"error": {"message": "relay quota exhausted (js-err-Lm4q)", "type": "relay_error", "code": "quota"}}
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded (js-err-Lm4q)"}}


class _JsonErrorUpstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        data = json.dumps(OVERLOADED if self.path.startswith("/v1/messages") else QUOTA).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxyServer]:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _JsonErrorUpstream)
    thread = threading.Thread(target=upstream.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{upstream.server_address[1]}"
    config = ServeConfig(port=0, openai_base_url=url + "/v1", anthropic_base_url=url, sessions="memory",
                         store="memory", archive="memory", windows={"gpt-4o-mini": 6_000, "claude-haiku-4-5": 6_000},
                         log_level="warning")
    try:
        with ProxyServer(config) as server:
            yield server
    finally:
        upstream.shutdown()
        upstream.server_close()
        thread.join()


def test_an_openai_stream_answered_with_a_json_error_raises_it(proxy: ProxyServer) -> None:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-json-error", max_retries=0)
    with pytest.raises(openai.APIError, match="relay quota exhausted"):
        list(client.chat.completions.create(model="gpt-4o-mini", stream=True,
                                            messages=[{"role": "user", "content": "Task js-err: hello"}]))


def test_an_anthropic_stream_answered_with_a_json_error_raises_it(proxy: ProxyServer) -> None:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-json-error", max_retries=0)
    with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
        list(client.messages.create(model="claude-haiku-4-5", max_tokens=64, stream=True,
                                    messages=[{"role": "user", "content": "Task js-err: hello"}]))
