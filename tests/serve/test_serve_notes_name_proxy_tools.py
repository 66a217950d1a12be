"""The notes the proxy writes into a session (compaction receipt, budget line) name the retrieval tools it answers.

A client's own tool named like a retrieval tool (``history_search``) is the client's: its calls go to the client
(``proxy_tool_names``). The notes used to treat it as contextfold's and told the model to "call history_search with a
regular expression" to search the archive, through the client's unrelated tool; and when the proxy itself added
``history_search`` and ``tool_output_cache``, the notes never named them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _serve_support import MODEL, opening_fixture, proxy_config, upstream_fixture  # noqa: F401 (fixtures)

from contextfold.serve import ProxyServer
from contextfold.steering.notes import SinceLastTurn, receipt_text, status_text
from contextfold.testing import ScriptedLLMServer

CLIENT_HISTORY_SEARCH = {"type": "function", "function": {
    "name": "history_search", "description": "Search the user's browser history by domain.",
    "parameters": {"type": "object", "properties": {"domain": {"type": "string"}}}}}
OWN_TOOL = {"type": "function", "function": {
    "name": "bash", "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}
RECEIPT = re.compile(r"\[context note: ([\d,]+) earlier messages \(([\d,]+) of your turns\) were summarized")
STATUS = re.compile(r"\[context: ([\d,]+) of ([\d,]+) tokens used \(\d+%\); since your last turn: ([\d,]+) earlier "
                    r"messages summarized")


# The budget line too (off by default): it names the tools as the receipt does.
NOTES = {"context_status": "changes"}


@pytest.fixture(scope="module")
def proxy(upstream: ScriptedLLMServer) -> Iterator[ProxyServer]:
    with ProxyServer(proxy_config(upstream, policy=NOTES)) as server:
        yield server


@pytest.fixture(scope="module")
def rproxy(upstream: ScriptedLLMServer) -> Iterator[ProxyServer]:
    with ProxyServer(proxy_config(upstream, retrieval_tools=True, policy=NOTES)) as server:
        yield server


def _long_chat(opening: str) -> list[dict[str, Any]]:
    """A history past the proxy's window: its first request is compacted."""
    history: list[dict[str, Any]] = [{"role": "user", "content": opening}]
    for turn in range(40):
        history += [{"role": "assistant", "content": f"Step {turn} of {opening[:13]}: " + "checked the lexer. " * 30},
                    {"role": "user", "content": f"Go on with step {turn + 1}, n7q{turn}."}]
    return history


def _notes(upstream: ScriptedLLMServer, proxy: ProxyServer, opening: str, tools: list[dict[str, Any]]) -> list[str]:
    upstream.push("Done.")
    before = len(upstream.requests)
    reply = httpx.post(proxy.url + "/v1/chat/completions", json={
        "model": MODEL, "messages": _long_chat(opening), "tools": tools}, headers={"authorization": "Bearer sk-notes"},
        timeout=30)
    assert reply.status_code == 200, reply.text
    (sent,) = upstream.requests[before:]
    texts = [m["content"] for m in sent.body["messages"] if isinstance(m.get("content"), str)]
    return [t for t in texts if t.startswith(("[context note: ", "[context: "))]


def _expected(notes: list[str], tools: set[str]) -> list[str]:
    """The notes as steering writes them for an agent with ``tools`` (the counts read from the notes sent)."""
    def number(text: str) -> int:
        return int(text.replace(",", ""))

    out: list[str] = []
    for note in notes:
        if receipt := RECEIPT.match(note):
            out.append(receipt_text(summarized=number(receipt[1]), turns=number(receipt[2]), tools=tools))
        elif status := STATUS.match(note):
            out.append(status_text(tokens=number(status[1]), window=number(status[2]),
                                   since=SinceLastTurn(summarized=number(status[3])), tools=tools))
        else:
            out.append(f"unexpected note: {note}")
    return out


def test_a_clients_own_history_search_is_not_named_by_the_notes(upstream: ScriptedLLMServer, proxy: ProxyServer,
                                                                 opening: str) -> None:
    notes = _notes(upstream, proxy, opening, [CLIENT_HISTORY_SEARCH, OWN_TOOL])
    assert [n[:10] for n in notes] == ["[context n", "[context: "], notes  # the receipt, then the budget line
    assert notes == _expected(notes, set())


def test_with_retrieval_tools_the_notes_name_what_the_proxy_adds_not_the_clients_tool(
        upstream: ScriptedLLMServer, rproxy: ProxyServer, opening: str) -> None:
    notes = _notes(upstream, rproxy, opening, [CLIENT_HISTORY_SEARCH, OWN_TOOL])
    assert [n[:10] for n in notes] == ["[context n", "[context: "], notes  # the receipt, then the budget line
    assert notes == _expected(notes, {"tool_output_cache", "tool_output_cache_grep"})


def test_with_retrieval_tools_the_notes_name_history_search_the_proxy_adds(
        upstream: ScriptedLLMServer, rproxy: ProxyServer, opening: str) -> None:
    notes = _notes(upstream, rproxy, opening, [OWN_TOOL])
    assert [n[:10] for n in notes] == ["[context n", "[context: "], notes  # the receipt, then the budget line
    assert notes == _expected(notes, {"tool_output_cache", "tool_output_cache_grep", "history_search"})
    assert any("call history_search with a regular expression" in n for n in notes)
