"""A client without a session header that slides its own window: one session, and only what it sent goes upstream.

Found by the twelfth red team and left open: many chat UIs keep their system prompt (maybe their task) and drop their
oldest turn each request. Without a session header each slid request was a new session (38 stored sessions for 40
turns at 9466d5b), starting from an empty view, archive and output cache. A first fix (s12p-keep) continued the
session but kept in its view what the client dropped: the upstream request grew every turn (~5.5K -> ~15.5K
characters in 40 turns; with a 128K window up to the window), a bill the client did not choose. Now the session goes
on and the messages of the items the client dropped leave its view (archived first): the upstream gets exactly what
the client sent, plus contextfold's own notes when it compacts or masks. An edited or reordered earlier message is no
slide: that request gets a session of its own holding exactly what it sent (a fork), the first one is left as it was.

Real HTTP on 127.0.0.1: the scripted upstream and the proxy; the exact messages of the upstream requests are checked.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import openai
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache.refs import ref_id_for
from contextfold.formats import get_format
from contextfold.serve import ProxyServer, ServeConfig
from contextfold.serve.provenance import MIN_SLIDE_OVERLAP, decode_traced, slide_of
from contextfold.serve.sessions import Backend, restore
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall

MODEL = "gpt-4o-mini"
WINDOW = 6_000
TURNS = 12
KEPT = 4  # messages the client keeps besides its fixed head (two turns), plus its new user message


@pytest.fixture(scope="module", name="upstream")
def upstream_fixture() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=8_000, validator="formats") as server:
        yield server


@pytest.fixture(name="served", params=[False], ids=["proxy"])
def served_fixture(upstream: ScriptedLLMServer,
                   request: pytest.FixtureRequest) -> Iterator[tuple[ProxyServer, Backend]]:
    config = ServeConfig(port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url,
                         sessions="memory", store="memory", archive="memory",
                         windows={MODEL: WINDOW, "claude-haiku-4-5": WINDOW},
                         log_level="warning", retrieval_tools=request.param)
    backend = Backend(config)
    with ProxyServer(config, backend=backend) as server:
        yield server, backend
    backend.close()


def _views(backend: Backend, nonce: str) -> dict[str, list[Any]]:
    """The stored sessions holding a view with ``nonce`` (pointer entries hold none)."""
    data = backend.sessions._data  # type: ignore[attr-defined]
    return {sid: list(messages) for sid, (messages, _) in data.items()
            if messages and any(nonce in m.text for m in messages)}


def _client(proxy: ProxyServer, nonce: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=f"sk-slide-{nonce}", max_retries=0)


def _ask(llm: openai.OpenAI, upstream: ScriptedLLMServer, messages: list[dict[str, Any]],
         reply: str) -> tuple[list[dict[str, Any]], str]:
    """Send ``messages``; what reached the upstream, and the reply."""
    upstream.push(reply)
    before = len(upstream.requests)
    answer = llm.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    return upstream.requests[before].body["messages"], str(answer.choices[0].message.content)


@pytest.mark.parametrize("keeps_task", [False, True], ids=["system-only", "system-and-task"])
def test_a_client_sliding_its_window_stays_in_one_session_and_the_upstream_gets_what_it_sent(
        upstream: ScriptedLLMServer, served: tuple[ProxyServer, Backend], keeps_task: bool) -> None:
    proxy, backend = served
    nonce = uuid.uuid4().hex[:8]
    head: list[dict[str, Any]] = [{"role": "system", "content": f"You are agent {nonce}."}]
    if keeps_task:
        head.append({"role": "user", "content": f"Task {nonce}: keep the build green."})
        head.append({"role": "assistant", "content": "On it."})
    llm = _client(proxy, nonce)
    history: list[dict[str, Any]] = []
    for turn in range(TURNS):
        history.append({"role": "user", "content": f"step {turn} of {nonce}: run the tests and say what failed"})
        messages = [*head, *history[-(KEPT + 1):]]
        sent, reply = _ask(llm, upstream, messages, f"step {turn} done ({nonce}): all green")
        assert sent == messages, f"turn {turn}: the upstream got {len(sent)} messages, the client sent {len(messages)}"
        history.append({"role": "assistant", "content": reply})
    ours = _views(backend, nonce)
    assert len(ours) == 1, f"{len(ours)} sessions for one conversation of {TURNS} turns"
    # The archive keeps what the client dropped: the session's whole history is there.
    (session,) = ours
    texts = [m.text for m in restore(backend, session)]
    assert all(any(f"step {turn} of {nonce}:" in t for t in texts) for turn in range(TURNS))
    # Each message the client dropped is archived once, not the whole view at each slide.
    archived = sum(len(messages) for _, messages in backend.archive.transcripts(session))
    assert archived <= 2 * TURNS, f"{archived} messages archived for {2 * TURNS} sent"


def test_an_edited_or_reordered_earlier_message_gets_a_session_of_its_own(
        upstream: ScriptedLLMServer, served: tuple[ProxyServer, Backend]) -> None:
    proxy, backend = served
    nonce = uuid.uuid4().hex[:8]
    system = {"role": "system", "content": f"You are agent {nonce}."}
    llm = _client(proxy, nonce)
    history: list[dict[str, Any]] = []
    for turn in range(6):
        history.append({"role": "user", "content": f"step {turn} of {nonce}"})
        _, reply = _ask(llm, upstream, [system, *history[-(KEPT + 1):]], f"ok {turn} {nonce}")
        history.append({"role": "assistant", "content": reply})
    (first, view), = _views(backend, nonce).items()
    kept = history[-KEPT:]
    edited = [system, {**kept[0], "content": f"step 4 of {nonce}, edited"}, *kept[1:],
              {"role": "user", "content": f"step 6 of {nonce}"}]
    sent, _ = _ask(llm, upstream, edited, f"ok edited {nonce}")
    assert sent == edited  # (no wrong merge: nothing of the first session's view is sent with it)
    reordered = [system, kept[2], kept[3], kept[0], kept[1], {"role": "user", "content": f"step 7 of {nonce}"}]
    sent, _ = _ask(llm, upstream, reordered, f"ok reordered {nonce}")
    assert sent == reordered
    sessions = _views(backend, nonce)
    assert len(sessions) == 3 and sessions[first] == view  # (the first session is left as it was)


def test_a_slid_window_leaves_one_pointer_and_a_shared_last_message_joins_nothing(
        upstream: ScriptedLLMServer, served: tuple[ProxyServer, Backend]) -> None:
    proxy, backend = served
    nonce = uuid.uuid4().hex[:8]
    llm = _client(proxy, nonce)
    system = {"role": "system", "content": f"You are agent {nonce}."}
    history: list[dict[str, Any]] = []
    for turn in range(6):
        history.append({"role": "user", "content": f"step {turn} of {nonce}"})
        _, reply = _ask(llm, upstream, [system, *history[-(KEPT + 1):]], f"ok {turn}")
        history.append({"role": "assistant", "content": reply})
    data = backend.sessions._data  # type: ignore[attr-defined]
    pointers = [sid for sid, (messages, _) in data.items()
                if not messages and backend.sessions.load_state(sid).marks.get("session") in _views(backend, nonce)]
    assert len(pointers) == 1  # (the tail pointer: one, not one per turn)
    # Another conversation whose first message is the newest the session was fed: one item in common is no slid
    # window, it is a session of its own.
    other = [system, history[-2], {"role": "assistant", "content": "elsewhere"},
             {"role": "user", "content": f"another task {nonce}"}]
    sent, _ = _ask(llm, upstream, other, "other")
    assert sent == other
    assert len(_views(backend, nonce)) == 2


def test_what_the_client_dropped_never_goes_upstream_when_contextfold_compacts(
        upstream: ScriptedLLMServer, served: tuple[ProxyServer, Backend]) -> None:
    proxy, backend = served
    nonce = uuid.uuid4().hex[:8]
    llm = _client(proxy, nonce)
    system = {"role": "system", "content": f"You are agent {nonce}."}
    history: list[dict[str, Any]] = []
    for turn in range(8):
        call = f"call_{turn}_{nonce}"
        history += [{"role": "user", "content": f"step {turn} of {nonce}: read the log"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": call, "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": call, "content": f"log {turn} {nonce}: " + "line ok\n" * 900}]
        messages = [system, *history[-7:]]  # (the client keeps its previous exchange and sends the new one)
        sent, reply = _ask(llm, upstream, messages, f"read {turn}")
        history.append({"role": "assistant", "content": reply})
        # Two outputs are over the window: contextfold compacts; its notes open with "[context".
        notes = [m for m in sent if str(m.get("content")).startswith("[context")]
        sent_of_client = [m for m in sent if m not in notes]
        assert all(m in messages for m in sent_of_client), f"turn {turn}: a message the client did not send"
        assert len(str(sent_of_client)) <= len(str(messages))
        assert sum(len(str(m["content"])) for m in notes) < 1_000  # (the summary and its note: bounded, small)
    assert len(_views(backend, nonce)) == 1


@pytest.mark.parametrize("served", [True], indirect=True, ids=["retrieval-tools"])
def test_a_retrieval_round_leaves_the_view_with_the_request_it_answered(
        upstream: ScriptedLLMServer, served: tuple[ProxyServer, Backend]) -> None:
    proxy, backend = served
    nonce = uuid.uuid4().hex[:8]
    llm = _client(proxy, nonce)
    log = "\n".join(f"{nonce} [{i:04d}] step ok" for i in range(900)) + "\nneedle: linker error in unit_42.o"
    bash = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}
    system = {"role": "system", "content": f"You are agent {nonce}."}
    history: list[dict[str, Any]] = [
        {"role": "user", "content": f"build it ({nonce})"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_own", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_own", "content": log}]
    upstream.push(Reply.calling(ScriptedToolCall("tool_output_cache_grep", {"ref_id": ref_id_for(log.encode()),
                                                                            "pattern": "needle"}, id="call_grep")),
                  "The linker fails on unit_42.o.")
    answer = llm.chat.completions.create(model=MODEL, messages=[system, *history], tools=[bash])  # type: ignore[list-item]
    history += [{"role": "assistant", "content": answer.choices[0].message.content},
                {"role": "user", "content": f"fix it ({nonce})"}]
    sent, reply = _ask(llm, upstream, [system, *history], "Rebuilding.")
    assert any(m.get("tool_calls") and m["tool_calls"][0]["id"] == "call_grep" for m in sent)  # (the round stays)
    history += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"and test it ({nonce})"}]
    # The client drops its first request (the build, its output): the round that answered it goes with it.
    window = [system, *history[3:]]
    upstream.push("Testing.")
    before = len(upstream.requests)
    llm.chat.completions.create(model=MODEL, messages=window, tools=[bash])  # type: ignore[list-item]
    sent = upstream.requests[before].body["messages"]
    assert "call_grep" not in str(sent) and "call_own" not in str(sent) and "needle" not in str(sent)
    assert [m for m in sent if not str(m.get("content")).startswith("[")] == window
    assert len(_views(backend, nonce)) == 1


def _unmarked(value: Any) -> Any:
    """``value`` without ``cache_control`` marks (contextfold places its own breakpoints for Anthropic)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _anthropic_turn(k: int, nonce: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"step {k} of {nonce}: read"},
            {"role": "assistant", "content": [{"type": "text", "text": "reading"},
                                              {"type": "tool_use", "id": f"tu_{k}", "name": "read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"tu_{k}", "content": f"out {k}"},
                                         {"type": "text", "text": "go on"}]}]


def _responses_turn(k: int, nonce: str) -> list[dict[str, Any]]:
    return [{"type": "message", "role": "user", "content": f"step {k} of {nonce}: read"},
            {"type": "function_call", "call_id": f"c{k}a", "name": "read", "arguments": "{}"},
            {"type": "function_call", "call_id": f"c{k}b", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{k}a", "output": f"out {k}a"},
            {"type": "function_call_output", "call_id": f"c{k}b", "output": f"out {k}b"}]


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_a_sliding_client_of_the_other_apis_gets_what_it_sent_with_tool_calls(
        upstream: ScriptedLLMServer, served: tuple[ProxyServer, Backend], api: str) -> None:
    """Items the format reads together (an Anthropic user turn after tool results, a Responses turn's calls)."""
    proxy, backend = served
    nonce = uuid.uuid4().hex[:8]
    history: list[dict[str, Any]] = []
    per_turn = 4 if api == "messages" else 6  # (the turn's items and the reply)
    with httpx.Client(timeout=30) as client:
        for k in range(6):
            history += _anthropic_turn(k, nonce) if api == "messages" else _responses_turn(k, nonce)
            window = history[-(2 * per_turn - 1):]  # (the previous turn whole, and this one)
            upstream.push(f"done {k}")
            before = len(upstream.requests)
            if api == "messages":
                answer = client.post(proxy.url + "/v1/messages", headers={"x-api-key": f"sk-{nonce}"}, json={
                    "model": "claude-haiku-4-5", "max_tokens": 100, "system": f"agent {nonce}", "messages": window})
                assert answer.status_code == 200, answer.text
                sent = _unmarked(upstream.requests[before].body["messages"])
                history.append({"role": "assistant", "content": answer.json()["content"]})
            else:
                answer = client.post(proxy.url + "/v1/responses", headers={"authorization": f"Bearer sk-{nonce}"},
                                     json={"model": MODEL, "instructions": f"agent {nonce}", "input": window})
                assert answer.status_code == 200, answer.text
                sent = upstream.requests[before].body["input"]
                history.extend({k: v for k, v in item.items() if k not in ("id", "status")}
                               for item in answer.json()["output"])
            assert sent == window, f"turn {k}"
    assert len(_views(backend, nonce)) == 1


def test_decode_traced_maps_merged_items_to_their_shared_message() -> None:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a"},
        {"type": "function_call_output", "call_id": "c2", "output": "b"},
        {"type": "message", "role": "user", "content": "next"},
    ]
    decode = get_format("openai_responses").decode
    messages, owners = decode_traced(decode, items)
    assert messages == decode(items)
    assert len(owners) == len(items)
    assert owners[1] == owners[2] and len(owners[1]) == 1  # (two calls, one assistant message)
    assert owners[0] != owners[1] and owners[3] != owners[4] and owners[5] == [len(messages) - 1]


@settings(max_examples=40)
@given(st.integers(0, 3), st.integers(3, 12), st.integers(1, 10), st.integers(0, 4), st.data())
def test_slide_of_finds_what_the_client_dropped(kept: int, fed: int, dropped: int, new: int,
                                               data: st.DataObject) -> None:
    known = [f"k{i}" for i in range(kept + fed)]
    dropped = min(dropped, fed - MIN_SLIDE_OVERLAP)
    if dropped < 1:
        return
    keys = [*known[:kept], *known[kept + dropped:], *(f"n{i}" for i in range(new))]
    assert slide_of(known, keys) == (kept, kept + dropped)
    assert slide_of(known, [*known, *keys[len(keys) - new:]]) is None  # an extension is no slide
    kept_of_newest = data.draw(st.integers(0, MIN_SLIDE_OVERLAP - 1))
    assert slide_of(known, [*known[:kept], *known[len(known) - kept_of_newest:], "x"]) is None
