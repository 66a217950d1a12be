"""A stream request answered with status 200 and a JSON error body reaches the client's SDK as an error.

Some gateways answer ``stream: true`` with 200, ``application/json`` and ``{"error": ...}``. base19 relayed that
body as the stream's bytes: the SDKs read events only, found none, and returned an empty stream without raising (an
agent took it for a reply with nothing in it). It is now the stream's error event, as for an error that opens a
200 event stream; an overflow in it is still recovered first (tests/redteam/test_redteam12_serve_error_in_200.py).

The upstream is a real HTTP server on loopback (the scripted server streams every 200 of a stream request).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import openai
import pytest
from _serve_support import RawUpstream, proxy_of

from contextfold.serve import ProxyServer

QUOTA = {"error": {"message": "relay quota exhausted (js-err-Lm4q)", "type": "relay_error", "code": "quota"}}
# A gateway's error longer than the proxy's 64 KiB peek at a stream (a long detail, the request echoed): s20f relayed
# it raw past the peek, and the SDK returned an empty stream.
LONG_QUOTA = {"error": {**QUOTA["error"], "detail": "d" * 70_000}}
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded (js-err-Lm4q)"}}


def json_error(path: str) -> tuple[str, list[bytes]]:
    return "application/json", [json.dumps(OVERLOADED if path.startswith("/v1/messages") else QUOTA).encode()]


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxyServer]:
    with RawUpstream(json_error) as upstream, proxy_of(upstream) as server:
        yield server


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


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_a_json_error_longer_than_the_peek_raises_it(content_type: str) -> None:
    with RawUpstream(lambda _path: (content_type, [json.dumps(LONG_QUOTA).encode()])) as upstream, \
            proxy_of(upstream) as proxy:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-json-error", max_retries=0)
        with pytest.raises(openai.APIError, match="relay quota exhausted") as raised:
            list(client.chat.completions.create(model="gpt-4o-mini", stream=True,
                                                messages=[{"role": "user", "content": "Task js-err: hello"}]))
    assert raised.value.body == LONG_QUOTA["error"]
