"""An edited retry of a failed continuation (``previous_response_id``) is fed instead of the failed try's input.

A continuation is fed and saved before it goes upstream. When its call failed (the upstream's 500, a client gone
mid-stream) the client continues the same response again, often with its input changed (a tool result cut shorter,
a reworded question). Responses' own semantics: a response continued is its history plus the new input; the failed
try is not part of it. base19 kept the failed try's input in the view and fed the retry's after it: the model saw
what the client took back, and a tool result sent again for the same call was dropped as a duplicate, so the model
read the failed try's version of it and never the retry's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _serve_support import MODEL, UPSTREAM_WINDOW, proxy_config

from contextfold.serve import ProxyServer
from contextfold.serve.identity import caller_scope, session_id
from contextfold.serve.sessions import resolve_pointer
from contextfold.testing import ErrorReply, Reply, ScriptedLLMServer, ScriptedToolCall

KEY = "sk-edited-retry-caller"
HEADERS = {"authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=UPSTREAM_WINDOW, validator="formats") as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream: ScriptedLLMServer) -> Iterator[ProxyServer]:
    with ProxyServer(proxy_config(upstream)) as server:
        yield server


def post(proxy: ProxyServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(proxy.url + "/v1/responses", json={"model": MODEL, **body}, headers=HEADERS, timeout=30)


def sent_input(upstream: ScriptedLLMServer) -> str:
    return json.dumps(upstream.requests[-1].body["input"])


def test_a_tool_result_sent_again_after_a_failed_call_is_the_one_the_model_reads(
        upstream: ScriptedLLMServer, proxy: ProxyServer) -> None:
    upstream.push(Reply.calling(ScriptedToolCall("cat", {"file": "build.log"}, id="call_build")))
    first = post(proxy, {"input": "Task edited-retry-1: read build.log and say what failed."})
    assert first.status_code == 200, first.text
    upstream.push(ErrorReply.server_error())
    failed = post(proxy, {"previous_response_id": first.json()["id"], "input": [
        {"type": "function_call_output", "call_id": "call_build", "output": "FIRST TRY: " + "noise " * 40}]})
    assert failed.status_code == 500
    upstream.push("The link step failed.")
    retried = post(proxy, {"previous_response_id": first.json()["id"], "input": [
        {"type": "function_call_output", "call_id": "call_build", "output": "SECOND TRY: unit_7.c failed to link"}]})
    assert retried.status_code == 200, retried.text
    sent = sent_input(upstream)
    assert "SECOND TRY" in sent and "FIRST TRY" not in sent  # (base19: FIRST TRY only)
    assert sent.count("call_build") == 2  # (the call and its one result)
    # The session goes on from the retry's reply, and the failed try's input is kept in the archive.
    upstream.push("Done.")
    after = post(proxy, {"previous_response_id": retried.json()["id"], "input": "And how to fix it?"})
    assert after.status_code == 200, after.text
    sent = sent_input(upstream)
    assert "SECOND TRY" in sent and "FIRST TRY" not in sent and "The link step failed." in sent
    session = resolve_pointer(proxy.serve_app.backend,
                              session_id(caller_scope(KEY, proxy.config.key_salt), "response", first.json()["id"]))
    assert session is not None
    archived = json.dumps([m.text for _, messages in proxy.serve_app.backend.archive.transcripts(session)
                           for m in messages])
    assert "FIRST TRY" in archived


def test_a_question_reworded_after_a_failed_call_replaces_the_first_wording(
        upstream: ScriptedLLMServer, proxy: ProxyServer) -> None:
    upstream.push("Listed.")
    first = post(proxy, {"input": "Task edited-retry-2: list the flaky tests."})
    upstream.push(ErrorReply.server_error())
    assert post(proxy, {"previous_response_id": first.json()["id"],
                        "input": "Which of them FAIL-ON-LINUX?"}).status_code == 500
    upstream.push("Two of them.")
    assert post(proxy, {"previous_response_id": first.json()["id"],
                        "input": "Which of them fail on macOS?"}).status_code == 200
    sent = sent_input(upstream)
    assert "fail on macOS" in sent and "FAIL-ON-LINUX" not in sent and sent.count("Listed.") == 1


def test_the_same_request_retried_after_its_call_failed_is_fed_once(
        upstream: ScriptedLLMServer, proxy: ProxyServer) -> None:
    upstream.push("Listed.")
    first = post(proxy, {"input": "Task edited-retry-3: list the slow tests."})
    upstream.push(ErrorReply.server_error())
    body = {"previous_response_id": first.json()["id"], "input": "Which take over a MINUTE-3?"}
    assert post(proxy, body).status_code == 500
    upstream.push("One.")
    assert post(proxy, body).status_code == 200
    assert sent_input(upstream).count("MINUTE-3") == 1
