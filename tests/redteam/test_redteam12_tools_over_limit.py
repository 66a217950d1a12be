"""Tool schemas larger than the provider's real limit (far below the configured window) must fail as what they are.

Found by the twelfth red team: an agent with 19 tools (~8,600 tokens of schemas) on gpt-4o (128K window) behind a
provider that takes 8,000 tokens. The first call's overflow taught the limit; the retry's compaction budget was the
learned hard budget less the tools, a negative number, and ``call_with_recovery`` ended in
``ConfigError: budget: must be a positive number of tokens, got -649`` (with a shorter history, in the stall guard's
"what is left is pinned, protected or the latest request"): an error about a setting that was fine, or about the
conversation, never naming the tools. A configured window the tools fill raised the same ConfigError from
``prepare()``, and the proxy answered a request whose tools fill the window with a 500 "internal error
(ConfigError)". Now recovery gives up at once saying the tools alone take more than the limit leaves
(``RecoveryFailed``, the provider's error its cause, one call made), ``prepare()`` raises ``InsufficientBudget``
naming the tools, and the proxy answers 400 saying so without calling the provider.
"""

from __future__ import annotations

import openai
import pytest

from contextfold.errors import InsufficientBudget, RecoveryFailed
from contextfold.manager import ContextManager
from contextfold.recovery import call_with_recovery
from contextfold.testing.server import ScriptedLLMServer

NONCE = "rt12-tools-3Wd8"
PROVIDER_LIMIT = 8_000


def _tool(i: int) -> dict[str, object]:
    properties = {f"p{j}": {"type": "string", "description": "a parameter with meaning " * 3} for j in range(8)}
    return {"type": "function", "function": {
        "name": f"tool_{i}", "description": f"{NONCE} does a thing with many options and careful semantics. " * 12,
        "parameters": {"type": "object", "properties": properties}}}


def _session(tools: list[dict[str, object]], pairs: int, **options: object) -> ContextManager:
    cm = ContextManager("gpt-4o", store="memory", archive="memory", tools=tools, **options)  # type: ignore[arg-type]
    cm.add({"role": "system", "content": "You are a coding agent."})
    for k in range(pairs):
        cm.add({"role": "user", "content": f"step {k}: " + "please analyse the build output. " * 20})
        cm.add({"role": "assistant", "content": f"analysis {k}: " + "the compiler reported an error. " * 20})
    cm.add({"role": "user", "content": f"now fix it {NONCE}"})
    return cm


@pytest.mark.parametrize("pairs", [12, 40])
def test_recovery_gives_up_at_once_naming_tools_over_the_providers_real_limit(pairs: int) -> None:
    tools = [_tool(i) for i in range(19)]
    cm = _session(tools, pairs)
    with ScriptedLLMServer(default="Fixed.", context_window=PROVIDER_LIMIT) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        with pytest.raises(RecoveryFailed, match="tool schemas") as caught:
            call_with_recovery(cm, lambda view: client.chat.completions.create(
                model="gpt-4o", messages=view, tools=tools))
        assert isinstance(caught.value.__cause__, openai.BadRequestError)
        assert [r.status for r in server.requests] == [400]


def test_a_configured_window_the_tools_fill_is_insufficient_budget_naming_them() -> None:
    cm = _session([_tool(i) for i in range(24)], 12, max_context_tokens=PROVIDER_LIMIT)
    with pytest.raises(InsufficientBudget, match="tool schemas") as caught:
        cm.prepare()
    assert caught.value.needed > caught.value.budget


def test_the_proxy_answers_400_naming_the_tools_when_they_fill_the_window() -> None:
    pytest.importorskip("starlette", reason="contextfold[serve] is not installed")
    import httpx
    from starlette.testclient import TestClient

    from contextfold.serve import ServeConfig
    from contextfold.serve.app import ServeApp

    calls: list[httpx.Request] = []
    config = ServeConfig(port=0, openai_base_url="http://upstream.test/v1", anthropic_base_url="http://upstream.test",
                         sessions="memory", store="memory", archive="memory", windows={"gpt-4o-mini": 6_000},
                         log_level="warning")
    app = ServeApp(config, transport=httpx.MockTransport(lambda request: calls.append(request) or httpx.Response(500)))
    history = [{"role": "system", "content": "You are a coding agent."},
               {"role": "user", "content": f"fix the build {NONCE}"}]
    with TestClient(app.app) as client:
        answer = client.post("/v1/chat/completions", headers={"authorization": "Bearer sk-test"}, json={
            "model": "gpt-4o-mini", "messages": history, "tools": [_tool(i) for i in range(20)]})
    assert answer.status_code == 400
    assert "tool schemas" in answer.json()["error"]["message"]
    assert calls == []
