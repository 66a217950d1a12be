"""The openai SDK's Chat Completions through the proxy: sessions, the view in place of the history, recovery."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from _serve_support import MODEL, UPSTREAM_WINDOW, WINDOW, opening_fixture, proxy_fixture, upstream_fixture  # noqa: F401 (fixtures)

from contextfold.media import known_limits
from contextfold.serve import ProxyServer
from contextfold.serve.config import DEFAULT_MAX_BODY_BYTES
from contextfold.testing import ErrorReply, Reply, ScriptedLLMServer, ScriptedToolCall


def client(proxy: ProxyServer, key: str = "sk-test-caller-one", **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=key, max_retries=0, default_headers=headers or None)


def big_output(n: int) -> str:
    return "\n".join(f"{n:03d}-{i:04d} src/module_{i % 17}.py:{i} WARNING value drifted to {i * 7}" for i in range(400))


def test_a_short_conversation_reaches_the_upstream_as_the_client_sent_it(upstream: ScriptedLLMServer,
                                                                          proxy: ProxyServer, opening: str) -> None:
    before = len(upstream.requests)
    upstream.push("Which file?", "Done.")
    llm = client(proxy)
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are careful."},
                                     {"role": "user", "content": opening}]
    reply = llm.chat.completions.create(model=MODEL, messages=history)
    assert reply.choices[0].message.content == "Which file?"
    history += [{"role": "assistant", "content": "Which file?"}, {"role": "user", "content": "parser.py"}]
    reply = llm.chat.completions.create(model=MODEL, messages=history, temperature=0)
    assert reply.choices[0].message.content == "Done."
    sent = upstream.requests[before:]
    assert [r.body["messages"] for r in sent] == [history[:2], history]  # nothing to compact: exactly the history
    assert sent[1].body["temperature"] == 0 and sent[1].body["model"] == MODEL
    assert {r.headers["authorization"] for r in sent} == {"Bearer sk-test-caller-one"}  # the caller's key, forwarded
    assert not any(k.startswith("x-contextfold") for r in sent for k in r.headers)


def test_big_tool_outputs_in_a_small_window_stay_within_it_and_valid(upstream: ScriptedLLMServer,
                                                                    proxy: ProxyServer, opening: str) -> None:
    before = len(upstream.requests)
    llm = client(proxy)
    history: list[dict[str, Any]] = [{"role": "user", "content": opening}]
    for turn in range(8):
        upstream.push(Reply.calling(ScriptedToolCall("bash", {"cmd": f"run {turn}"}, id=f"call_{turn}")))
        reply = llm.chat.completions.create(model=MODEL, messages=history)
        call = reply.choices[0].message.tool_calls[0]  # type: ignore[index]
        history += [reply.choices[0].message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": big_output(turn)}]
    upstream.push("All done.")
    assert llm.chat.completions.create(model=MODEL, messages=history).choices[0].message.content == "All done."
    sent = upstream.requests[before:]
    assert len(sent) == 9 and not [r for r in sent if r.invalid or r.status != 200]
    assert len(json.dumps(history)) > 8 * UPSTREAM_WINDOW  # the client's history is far larger than the window
    assert all(r.input_tokens <= WINDOW for r in sent)
    last = sent[-1].body["messages"]
    # Every call is still answered once, in order; the outputs are cut to views with a ref to the full text.
    calls = [c["id"] for m in last for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert calls == results == [f"call_{t}" for t in range(8) if f"call_{t}" in calls]
    assert "tout_" in last[-1]["content"]
    assert opening in json.dumps(last)  # the task statement stays verbatim, compacted or not


def test_an_overflow_is_recovered_in_the_proxy(upstream: ScriptedLLMServer, proxy: ProxyServer, opening: str) -> None:
    before = len(upstream.requests)
    history = [{"role": "user", "content": opening}]
    for i in range(6):
        history += [{"role": "assistant", "content": f"step {i}: " + "reading the logs carefully " * 40},
                    {"role": "user", "content": f"go on {i}"}]
    upstream.push(ErrorReply.overflow(5_000, 3_000), "Recovered.")
    reply = client(proxy).chat.completions.create(model=MODEL, messages=history)
    assert reply.choices[0].message.content == "Recovered."
    first, second = upstream.requests[before:]
    assert first.status == 400 and second.status == 200
    assert second.input_tokens < first.input_tokens * 3_000 / 5_000
    assert second.body["messages"][-1] == {"role": "user", "content": "go on 5"}


def test_callers_never_share_a_session(upstream: ScriptedLLMServer, proxy: ProxyServer, opening: str) -> None:
    """Same opening, same session header, another key: the second caller's request carries only its history."""
    before = len(upstream.requests)
    upstream.push("A1", "B1", "A2")
    a, b = client(proxy, "sk-caller-a", **{"x-contextfold-session": "shared"}), client(
        proxy, "sk-caller-b", **{"x-contextfold-session": "shared"})
    a.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": opening}])
    b.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": opening + " (b)"}])
    a.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": opening},
                                                     {"role": "assistant", "content": "A1"},
                                                     {"role": "user", "content": "more"}])
    sent = [r.body["messages"] for r in upstream.requests[before:]]
    assert sent[1] == [{"role": "user", "content": opening + " (b)"}]
    assert sent[2] == [{"role": "user", "content": opening}, {"role": "assistant", "content": "A1"},
                       {"role": "user", "content": "more"}]
    assert proxy.serve_app.metrics.rebuilds._value.get() == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(("body", "status", "says"), [
    (b"{not json", 400, "not valid JSON"),
    (json.dumps({"model": MODEL, "messages": "hi"}).encode(), 400, "messages: expected a list"),
    (json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), 400, "model: a model name is required"),
    (json.dumps({"model": "no-such-model-xyz", "messages": [{"role": "user", "content": "x"}]}).encode(), 400,
     "does not know the context window"),
    (json.dumps({"model": MODEL, "messages": [{"role": "tool", "content": "x"}]}).encode(), 400, "messages"),
    (b"x" * (DEFAULT_MAX_BODY_BYTES + 1), 413, "over the proxy's limit"),
])
def test_bad_requests_get_a_clear_error_in_the_openai_shape(proxy: ProxyServer, body: bytes, status: int,
                                                            says: str) -> None:
    answer = httpx.post(proxy.url + "/v1/chat/completions", content=body, headers={"authorization": "Bearer k"})
    assert answer.status_code == status
    assert says in answer.json()["error"]["message"]


def test_the_proxy_takes_bodies_well_over_the_providers_limit_so_it_can_bring_them_under() -> None:
    """A screenshot history past Anthropic's 32 MB reaches the proxy's media eviction instead of its own 413."""
    published = known_limits("anthropic").max_bytes
    assert published is not None and 4 * published <= DEFAULT_MAX_BODY_BYTES


def test_other_sdk_calls_pass_through_to_the_provider(proxy: ProxyServer) -> None:
    """An endpoint the proxy does not manage (embeddings here) reaches the upstream as it is, errors included."""
    with pytest.raises(openai.NotFoundError, match=r"Invalid URL \(POST /v1/embeddings\)"):
        client(proxy).embeddings.create(model="text-embedding-3-small", input="hello")
