"""The retrieval tools' schemas the proxy adds to a request are counted against the window with its view.

With ``retrieval_tools`` on, every upstream request carries three tool schemas (~266 tokens) the client never sent.
The view was fitted as if they were not there: a history just under the hard threshold went out over it by them.
Counted as the request's extras now, as a client's own tools are.
"""

from __future__ import annotations

from typing import Any

import httpx
from _serve_support import MODEL, WINDOW, proxy_config

from contextfold import ContextManager
from contextfold.serve import ProxyServer
from contextfold.testing import ScriptedLLMServer

NONCE = "r17-schemas-Vh3k"


def counted(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> tuple[int, int]:
    """(tokens of ``messages`` and ``tools`` as the proxy counts them, the hard threshold of its window)."""
    probe = ContextManager(MODEL, max_context_tokens=WINDOW, archive="memory")
    probe.set_request_extras(tools=tools or [])
    probe.add(messages)
    return probe.tokens(), probe.budgets.hard


def test_a_history_just_under_the_threshold_goes_out_under_it_with_the_retrieval_tools() -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": f"Be brief. {NONCE}"}]
    probe = ContextManager(MODEL, max_context_tokens=WINDOW, archive="memory")
    probe.add(history)
    for turn in range(10_000):  # (just under the hard threshold without the tools: less than their ~266 tokens)
        step = [{"role": "user", "content": f"note {turn} {NONCE}: the parser fails on line {turn} " + "word " * 40},
                {"role": "assistant", "content": f"ok {turn}"}]
        probe.add(step)
        if probe.tokens() > probe.budgets.hard - 60:
            break
        history += step
    history.append({"role": "user", "content": f"what failed? {NONCE}"})
    tokens, hard = counted(history)
    assert hard - 200 < tokens <= hard
    with ScriptedLLMServer(validator="formats", default=f"ok {NONCE}") as upstream, \
            ProxyServer(proxy_config(upstream, retrieval_tools=True)) as proxy:
        reply = httpx.post(proxy.url + "/v1/chat/completions", json={"model": MODEL, "messages": history},
                           headers={"authorization": "Bearer sk-r17-schemas"}, timeout=30)
        assert reply.status_code == 200, reply.text
        body = upstream.requests[-1].body
    assert {tool["function"]["name"] for tool in body["tools"]} >= {"tool_output_cache", "history_search"}
    sent, _ = counted(body["messages"], body["tools"])
    assert sent <= hard  # (c04dd8d: over it by the schemas, the view sent whole)
