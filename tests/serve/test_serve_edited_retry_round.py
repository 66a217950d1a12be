"""An edited retry drops the failed try's input and the retrieval round the failed try recorded with it.

With retrieval tools, the failed try's call asked the proxy to grep a cut output; the proxy recorded that round
(the model's call and its result) in the view and then the next upstream call failed (500). The fed_input mark named
only the try's own input items, so the edited retry took the question out but left the model's grep for it and the
grep's result, answering nothing the conversation holds, in front of the retry's input. The round is named too.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _serve_support import MODEL, UPSTREAM_WINDOW, proxy_config

from contextfold.cache.refs import ref_id_for
from contextfold.serve import ProxyServer
from contextfold.testing import ErrorReply, Reply, ScriptedLLMServer, ScriptedToolCall

HEADERS = {"authorization": "Bearer sk-f5-caller"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=UPSTREAM_WINDOW, validator="formats") as server:
        yield server


def post(proxy: ProxyServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(proxy.url + "/v1/responses", json={"model": MODEL, **body}, headers=HEADERS, timeout=30)


def build_log(lines_count: int = 900) -> str:
    lines = [f"F5 [{i:04d}] step {i} ok" for i in range(lines_count)]
    lines[600] = "F5 [0600] needle: linker error in unit_42.o"
    return "\n".join(lines)


def test_the_failed_tries_retrieval_round_leaves_with_its_input(upstream: ScriptedLLMServer) -> None:
    log = build_log()
    with ProxyServer(proxy_config(upstream, retrieval_tools=True)) as proxy:
        upstream.push("Read it.")
        first = post(proxy, {"input": [
            {"role": "user", "content": "Task f5: why does the build fail?"},
            {"type": "function_call", "call_id": "call_make", "name": "bash", "arguments": '{"cmd": "make"}'},
            {"type": "function_call_output", "call_id": "call_make", "output": log}]})
        assert first.status_code == 200, first.text
        upstream.push(Reply.calling(ScriptedToolCall("tool_output_cache_grep",
                                                     {"ref_id": ref_id_for(log.encode()), "pattern": "needle"},
                                                     id="call_grep_failed_try")),
                      ErrorReply.server_error())
        failed = post(proxy, {"previous_response_id": first.json()["id"], "input": "QUESTION-A: grep the needle"})
        assert failed.status_code == 500, failed.text
        upstream.push("Fine.")
        retried = post(proxy, {"previous_response_id": first.json()["id"], "input": "QUESTION-B: just say hello"})
        assert retried.status_code == 200, retried.text
        sent = json.dumps(upstream.requests[-1].body["input"])
        assert "QUESTION-B" in sent and "QUESTION-A" not in sent
        assert "call_grep_failed_try" not in sent and "needle: linker error" not in sent, sent[-1500:]
