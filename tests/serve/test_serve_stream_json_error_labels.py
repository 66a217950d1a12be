"""A stream request answered 200 with a bare JSON error reaches the SDK as an error, whatever the upstream's label.

The JSON error became the stream's error event only when the content type started with application/json. A gateway
labelling the same body text/event-stream, text/plain or application/problem+json went to _stream_error, whose SSE
splitter found no event in it: the bytes were relayed and both SDKs returned an empty stream without raising. A whole
body within the peek with no event in it is now read as a JSON error too.
"""
from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest
from _serve_support import RawUpstream, proxy_of

from contextfold.serve import ProxyServer

QUOTA = {"error": {"message": "relay quota exhausted (f6-err)", "type": "relay_error", "code": "quota"}}
CONTENT_TYPE = {"value": "text/event-stream"}


def labelled_json_error(path: str) -> tuple[str, list[bytes]]:
    return CONTENT_TYPE["value"], [json.dumps(QUOTA).encode()]


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxyServer]:
    with RawUpstream(labelled_json_error) as upstream, proxy_of(upstream) as server:
        yield server


@pytest.mark.parametrize("content_type", ["text/event-stream", "text/plain; charset=utf-8",
                                          "application/problem+json"])
def test_a_json_error_in_a_200_stream_raises_whatever_its_label(proxy: ProxyServer, content_type: str) -> None:
    CONTENT_TYPE["value"] = content_type
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-f6", max_retries=0)
    with pytest.raises(openai.APIError, match="relay quota exhausted"):
        list(client.chat.completions.create(model="gpt-4o-mini", stream=True,
                                            messages=[{"role": "user", "content": "Task f6: hello"}]))
