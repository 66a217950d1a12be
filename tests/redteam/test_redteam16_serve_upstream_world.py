"""What the upstream and the model hand the proxy back, read defensively (red team 16).

Found by the sixteenth red team with a raw HTTP upstream on loopback behind the proxy. On 309338f each of these was
the client's 500 "internal error" (or a stream cut short):

- an error body nested past the JSON reader's depth (RecursionError reading it, 400 or 200);
- a 200 whose ``choices`` is no list (reading the reply's items);
- with the retrieval tools on, a round's call to an upstream that drops the connection (a 502 for the first call,
  a 500 for a retrieval round; a stream ended without a word);
- a 200 stream opening with an error event (Anthropic's ``overloaded_error``, an overflow recovery gave up on):
  the proxy relayed the upstream response it had closed after reading that event, so the client's response broke
  off after its headers and the error never reached it;
- with the retrieval tools on, a retrieval call the model wrote with arguments that are no JSON object (``[1]``,
  ``5``, a string) or a number or nothing as its id: the proxy records the calls in the session, which refused them
  (``InvalidHistory``). A model's arguments are untrusted input: the call is answered (the answer says what to fix),
  recorded with its arguments wrapped, and the client gets the reply of the next round;
- with the retrieval tools on, a client's own tool named like one of them (``history_search``): the proxy answered
  its calls from the session's archive, and the client's tool never ran. Its calls are the client's.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import httpx

from contextfold.serve import ProxyServer, ServeConfig

NONCE = "rt16-world-Hc7w"
MODEL = "gpt-4o-mini"
CLAUDE = "claude-haiku-4-5"
HEADERS = {"authorization": "Bearer sk-rt16-world", "x-api-key": "sk-rt16-world"}
DROP = (0, b"")  # close the connection without an answer


class RawUpstream:
    """An HTTP server on loopback answering each request with the next (status, body) queued, JSON or SSE."""

    def __init__(self) -> None:
        self.answers: deque[tuple[int, bytes]] = deque()
        self.bodies: list[dict[str, Any]] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                upstream.bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
                status, body = upstream.answers.popleft() if upstream.answers else (200, _chat_reply("ok"))
                if status == 0:
                    self.close_connection = True
                    return
                self.send_response(status)
                stream = body.startswith((b"data:", b"event:"))
                self.send_header("content-type", "text/event-stream" if stream else "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _chat_reply(text: str | None, calls: list[dict[str, Any]] | None = None) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return json.dumps({"id": "c", "object": "chat.completion", "model": MODEL, "choices": [
        {"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}]}).encode()


def _grep_call(arguments: Any, call_id: Any = "r1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "tool_output_cache_grep", "arguments": arguments}}


def _sse(events: list[dict[str, Any]], named: bool = False) -> bytes:
    return b"".join((f"event: {e['type']}\n".encode() if named else b"") + b"data: " + json.dumps(e).encode() + b"\n\n"
                    for e in events)


@pytest.fixture(scope="module", name="upstream")
def upstream_fixture() -> Iterator[RawUpstream]:
    server = RawUpstream()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _fresh_queue(upstream: RawUpstream) -> None:
    upstream.answers.clear()  # (a test that failed leaves no answers for the next one)


@pytest.fixture(scope="module", name="proxy")
def proxy_fixture(upstream: RawUpstream) -> Iterator[ProxyServer]:
    with ProxyServer(ServeConfig(port=0, openai_base_url=upstream.url + "/v1", anthropic_base_url=upstream.url,
                                 sessions="memory", store="memory", archive="memory", log_level="critical",
                                 windows={MODEL: 6_000, CLAUDE: 6_000}, retrieval_tools=True)) as server:
        yield server


def _chat(proxy: ProxyServer, name: str, **fields: Any) -> httpx.Response:
    return httpx.post(proxy.url + "/v1/chat/completions", headers=HEADERS, timeout=30, json={
        "model": MODEL, "messages": [{"role": "user", "content": f"{name} {NONCE}"}], **fields})


@pytest.mark.parametrize(("name", "status", "body"), [
    ("error nested deep", 400, b'{"error":' + b"[" * 5_000 + b"]" * 5_000 + b"}"),
    ("200 error nested deep", 200, b'{"error":{"message":' + b"[" * 5_000 + b"]" * 5_000 + b"}}"),
    ("choices a number", 200, b'{"id":"c","choices":5}'),
])
def test_an_odd_upstream_body_reaches_the_client_as_it_came(upstream: RawUpstream, proxy: ProxyServer, name: str,
                                                           status: int, body: bytes) -> None:
    upstream.answers.append((status, body))
    answer = _chat(proxy, name)
    assert answer.status_code == status, answer.text
    assert answer.content == body or json.loads(answer.content) == json.loads(body)


def test_a_retrieval_round_whose_upstream_drops_the_connection_is_a_502(upstream: RawUpstream,
                                                                        proxy: ProxyServer) -> None:
    upstream.answers.extend([(200, _chat_reply(None, [_grep_call('{"pattern": "x"}')])), DROP])
    answer = _chat(proxy, "dropped round")
    assert answer.status_code == 502, answer.text
    assert "could not be reached" in answer.json()["error"]["message"]


def test_a_streamed_retrieval_round_whose_upstream_drops_ends_with_an_error_event(upstream: RawUpstream,
                                                                                  proxy: ProxyServer) -> None:
    call = {"index": 0, **_grep_call('{"pattern": "x"}')}
    first = _sse([{"id": "c", "object": "chat.completion.chunk", "choices": [
                   {"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}, "finish_reason": None}]},
                  {"id": "c", "object": "chat.completion.chunk", "choices": [
                   {"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]) + b"data: [DONE]\n\n"
    upstream.answers.extend([(200, first), DROP])
    answer = _chat(proxy, "dropped streamed round", stream=True)
    assert answer.status_code == 200
    assert answer.text.rstrip().splitlines()[-2:][0] == "event: error"
    assert "could not be reached" in answer.text


@pytest.mark.parametrize(("arguments", "call_id"), [("[1]", "r1"), ("5", "r1"), ('"pattern"', "r1"), (7, "r1"),
                                                     ('{"pattern": "x"}', 42), ('{"pattern": "x"}', "")])
def test_a_chat_retrieval_call_with_odd_arguments_is_answered(upstream: RawUpstream, proxy: ProxyServer,
                                                              arguments: Any, call_id: Any) -> None:
    before = len(upstream.bodies)
    upstream.answers.extend([(200, _chat_reply(None, [_grep_call(arguments, call_id)])),
                             (200, _chat_reply(f"done {NONCE}"))])
    answer = _chat(proxy, f"odd arguments {arguments!r} {call_id!r}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == f"done {NONCE}"
    round_view = upstream.bodies[before + 1]["messages"]
    assert round_view[-1]["role"] == "tool" and round_view[-1]["tool_call_id"] == (str(call_id) or "retrieval_0")


def test_a_responses_retrieval_call_with_arguments_that_are_no_object_is_answered(upstream: RawUpstream,
                                                                                   proxy: ProxyServer) -> None:
    call = {"type": "function_call", "call_id": "r1", "name": "tool_output_cache_grep", "arguments": "[1, 2]"}
    done = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"done {NONCE}"}]}
    upstream.answers.extend([(200, json.dumps({"id": "resp_a", "object": "response", "output": [call]}).encode()),
                             (200, json.dumps({"id": "resp_b", "object": "response", "output": [done]}).encode())])
    answer = httpx.post(proxy.url + "/v1/responses", headers=HEADERS, timeout=30,
                        json={"model": MODEL, "input": f"responses odd arguments {NONCE}"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["output"] == [done]


@pytest.mark.parametrize("stream", [False, True])
def test_an_anthropic_retrieval_call_whose_input_is_no_object_is_answered(upstream: RawUpstream, proxy: ProxyServer,
                                                                         stream: bool) -> None:
    text = f"done {NONCE}"
    if stream:
        start = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                                      "content": [], "model": CLAUDE}}
        closing = [{"type": "message_delta", "delta": {"stop_reason": "tool_use"}}, {"type": "message_stop"}]
        calling = _sse([start, {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "t1", "name": "tool_output_cache_grep", "input": {}}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "[1,2]"}},
            {"type": "content_block_stop", "index": 0}, *closing], named=True)
        done = _sse([start, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                     {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                     {"type": "content_block_stop", "index": 0},
                     {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}, {"type": "message_stop"}],
                    named=True)
    else:
        calling = json.dumps({"id": "m", "type": "message", "role": "assistant", "model": CLAUDE, "content": [
            {"type": "tool_use", "id": "t1", "name": "tool_output_cache_grep", "input": [1, 2]}],
            "stop_reason": "tool_use"}).encode()
        done = json.dumps({"id": "m2", "type": "message", "role": "assistant", "model": CLAUDE, "content": [
            {"type": "text", "text": text}], "stop_reason": "end_turn"}).encode()
    upstream.answers.extend([(200, calling), (200, done)])
    answer = httpx.post(proxy.url + "/v1/messages", headers=HEADERS, timeout=30, json={
        "model": CLAUDE, "max_tokens": 100, "stream": stream,
        "messages": [{"role": "user", "content": f"anthropic odd input {stream} {NONCE}"}]})
    assert answer.status_code == 200, answer.text
    assert text in answer.text and "event: error" not in answer.text
    if stream:
        assert answer.text.rstrip().endswith('data: {"type":"message_stop"}')


@pytest.mark.parametrize("kind", ["overloaded", "overflow given up"])
def test_a_stream_opening_with_an_error_reaches_the_client_whole(upstream: RawUpstream, proxy: ProxyServer,
                                                                kind: str) -> None:
    if kind == "overloaded":
        error = {"type": "error", "error": {"type": "overloaded_error", "message": f"Overloaded {NONCE}"}}
        event = b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n"
        upstream.answers.append((200, event))
        answer = httpx.post(proxy.url + "/v1/messages", headers=HEADERS, timeout=30, json={
            "model": CLAUDE, "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": kind}]})
    else:
        error = {"error": {"message": f"Your input exceeds the context window of this model. {NONCE}",
                           "type": "invalid_request_error", "code": "context_length_exceeded"}}
        event = b"data: " + json.dumps(error).encode() + b"\n\n"
        upstream.answers.extend([(200, event)] * 4)  # the first call and the three retries
        answer = _chat(proxy, kind, stream=True)
        upstream.answers.clear()
    assert answer.status_code == 200
    name, _, data = answer.text.strip().rpartition("data: ")  # (the retrieval relay re-encodes Anthropic events)
    assert json.loads(data) == error and name == ("event: error\n" if kind == "overloaded" else "")


@pytest.mark.parametrize("stream", [False, True])
def test_a_clients_own_tool_named_like_a_retrieval_tool_is_the_clients(upstream: RawUpstream, proxy: ProxyServer,
                                                                      stream: bool) -> None:
    own = {"type": "function", "function": {"name": "history_search", "parameters": {"type": "object"}}}
    call = {"id": "h1", "type": "function", "function": {"name": "history_search", "arguments": '{"q": "x"}'}}
    if stream:
        reply = _sse([{"id": "c", "object": "chat.completion.chunk", "choices": [
                       {"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, **call}]},
                        "finish_reason": None}]},
                      {"id": "c", "object": "chat.completion.chunk", "choices": [
                       {"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]) + b"data: [DONE]\n\n"
    else:
        reply = _chat_reply(None, [call])
    before = len(upstream.bodies)
    upstream.answers.append((200, reply))
    answer = _chat(proxy, f"own history_search {stream}", tools=[own], stream=stream)
    assert answer.status_code == 200, answer.text
    assert len(upstream.bodies) - before == 1  # no round answered by the proxy
    assert '"history_search"' in answer.text and '"h1"' in answer.text
    assert [t["function"]["name"] for t in upstream.bodies[-1]["tools"]].count("history_search") == 1
