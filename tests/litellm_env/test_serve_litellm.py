"""LiteLLM and mini-swe-agent (which talks through LiteLLM) pointed at ``contextfold serve`` (litellm's own venv).

mini-swe-agent runs a small scripted task to the end: a shell agent whose commands print 40-300 KB into a
6,000-token window. Every request reaching the upstream must be valid, within the window, and hold each message once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price map from the network
litellm = pytest.importorskip("litellm", reason="litellm runs in its own environment (see .ci/run)")
pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

from contextfold.serve import ProxyServer, ServeConfig  # noqa: E402
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall  # noqa: E402

WINDOW = 6_000
MODEL = "gpt-4o-mini"


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedLLMServer]:
    # The upstream's window is the proxy's: a request over it would be refused (and show as a non-200 here).
    with ScriptedLLMServer(context_window=WINDOW, validator="formats") as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream: ScriptedLLMServer) -> Iterator[ProxyServer]:
    config = ServeConfig(port=0, openai_base_url=upstream.base_url, sessions="memory", store="memory",
                         archive="memory", windows={MODEL: WINDOW}, log_level="warning")
    with ProxyServer(config) as server:
        yield server


def options(proxy: ProxyServer) -> dict[str, Any]:
    return {"model": f"openai/{MODEL}", "api_base": proxy.url + "/v1", "api_key": "sk-litellm-caller",
            "max_retries": 0}


def test_litellm_completion_through_the_proxy_streaming_and_not(upstream: ScriptedLLMServer,
                                                                proxy: ProxyServer) -> None:
    before = len(upstream.requests)
    upstream.push("plain answer", "streamed answer in pieces")
    history = [{"role": "user", "content": "litellm task one"}]
    reply = litellm.completion(messages=history, **options(proxy))
    assert reply.choices[0].message.content == "plain answer"
    history += [{"role": "assistant", "content": "plain answer"}, {"role": "user", "content": "again"}]
    chunks = list(litellm.completion(messages=history, stream=True, **options(proxy)))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "streamed answer in pieces"
    sent = upstream.requests[before:]
    assert [r.body["messages"] for r in sent] == [history[:1], history]
    assert all(r.status == 200 and r.headers["authorization"] == "Bearer sk-litellm-caller" for r in sent)


def _commands(workdir: Path) -> list[str]:
    log = workdir / "build.log"
    log.write_text("".join(f"[{i:05d}] compiling module_{i % 97}.c ... ok ({i * 13 % 1000} ms)\n"
                           for i in range(6_000)))
    (workdir / "parser.py").write_text("def parse(text):\n    return text.split(',')\n" * 800)
    return [
        "cat build.log",                         # ~300 KB
        "grep -n 'module_42' build.log",
        "cat parser.py",                         # ~40 KB
        "seq 1 20000 | sed 's/$/ checked/'",      # ~250 KB
        "wc -l build.log parser.py",
        "printf 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\nparser fixed\\n'",
    ]


def test_mini_swe_agent_runs_a_task_to_the_end_through_the_proxy(upstream: ScriptedLLMServer, proxy: ProxyServer,
                                                                 tmp_path: Path) -> None:
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.litellm_model import LitellmModel

    commands = _commands(tmp_path)
    upstream.push(*(Reply.calling(ScriptedToolCall("bash", {"command": c}, id=f"call_m{i}"), text=f"Step {i}.")
                    for i, c in enumerate(commands)))
    before = len(upstream.requests)
    model = LitellmModel(model_name=f"openai/{MODEL}", cost_tracking="ignore_errors",
                         model_kwargs={"api_base": proxy.url + "/v1", "api_key": "sk-mini-caller"})
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path), timeout=30),
                         system_template="You are a shell agent. Use the bash tool.",
                         instance_template="Task: {{task}}", step_limit=20)
    result = agent.run("find why the parser drops empty fields")
    assert result["exit_status"] == "Submitted" and result["submission"].strip() == "parser fixed"

    sent = upstream.requests[before:]
    assert len(sent) == len(commands)
    client_history = json.dumps([m for m in agent.messages if m.get("role") != "exit"], default=str)
    assert len(client_history) > 100 * WINDOW  # the agent's own history is far over the window
    for request in sent:
        assert request.status == 200 and request.invalid is None  # valid, and accepted within the window
        assert request.input_tokens <= WINDOW
        messages = request.body["messages"]
        calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
        results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        assert len(calls) == len(set(calls)) and sorted(calls) == sorted(results)  # each once, each answered
        texts = [json.dumps(m, sort_keys=True) for m in messages]
        assert len(texts) == len(set(texts))  # no message twice
        assert "Task: find why the parser drops empty fields" in json.dumps(messages)
    # The last request still carries the latest step whole enough to act on, and every call id the agent made.
    assert sent[-1].body["messages"][-1]["role"] == "tool"
    assert sent[-1].body["messages"][-1]["tool_call_id"] == f"call_m{len(commands) - 2}"
