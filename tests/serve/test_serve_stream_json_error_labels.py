"""A stream request answered 200 with a bare JSON error reaches the SDK as an error, whatever the upstream's label.

The JSON error became the stream's error event only when the content type started with application/json. A gateway
labelling the same body text/event-stream, text/plain or application/problem+json went to _stream_error, whose SSE
splitter found no event in it: the bytes were relayed and both SDKs returned an empty stream without raising. A whole
body within the peek with no event in it is now read as a JSON error too.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest

from contextfold.serve import ProxyServer, ServeConfig

QUOTA = {"error": {"message": "relay quota exhausted (f6-err)", "type": "relay_error", "code": "quota"}}
CONTENT_TYPE = {"value": "text/event-stream"}


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        data = json.dumps(QUOTA).encode()
        self.send_response(200)
        self.send_header("content-type", CONTENT_TYPE["value"])
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxyServer]:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=upstream.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{upstream.server_address[1]}"
    config = ServeConfig(port=0, openai_base_url=url + "/v1", anthropic_base_url=url, sessions="memory",
                         store="memory", archive="memory", windows={"gpt-4o-mini": 6_000}, log_level="warning")
    try:
        with ProxyServer(config) as server:
            yield server
    finally:
        upstream.shutdown()
        upstream.server_close()
        thread.join()


@pytest.mark.parametrize("content_type", ["text/event-stream", "text/plain; charset=utf-8",
                                          "application/problem+json"])
def test_a_json_error_in_a_200_stream_raises_whatever_its_label(proxy: ProxyServer, content_type: str) -> None:
    CONTENT_TYPE["value"] = content_type
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-f6", max_retries=0)
    with pytest.raises(openai.APIError, match="relay quota exhausted"):
        list(client.chat.completions.create(model="gpt-4o-mini", stream=True,
                                            messages=[{"role": "user", "content": "Task f6: hello"}]))
