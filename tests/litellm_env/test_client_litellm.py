"""The LiteLLM wrapper against the scripted server through the real litellm (runs in litellm's own venv in CI).

litellm needs openai<3 while the main environment has openai 3, so ``.ci/run`` runs this directory in a venv of
its own (``pip install -e '.[litellm]' pytest hypothesis``, ``LITELLM_LOCAL_MODEL_COST_MAP=True``).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price map from the network
litellm = pytest.importorskip("litellm", reason="litellm runs in its own environment (see .ci/run)")

from contextfold.errors import ConfigError, RecoveryFailed  # noqa: E402
from contextfold.integrations.litellm_client import acompletion, completion  # noqa: E402
from contextfold.manager import ContextManager  # noqa: E402
from contextfold.messages import Message  # noqa: E402
from contextfold.pairing import normalize  # noqa: E402
from contextfold.recovery import parse_overflow  # noqa: E402
from contextfold.telemetry import RecordingTelemetry, RecoveryOverflow, RecoveryRetry  # noqa: E402
from contextfold.testing.server import ScriptedLLMServer  # noqa: E402
from contextfold.testing.wire import ErrorReply, Reply, ScriptedToolCall  # noqa: E402


def manager(tmp_path: Path) -> tuple[ContextManager, RecordingTelemetry]:
    events = RecordingTelemetry()
    return ContextManager("gpt-4o", max_context_tokens=60_000, store="memory", archive=str(tmp_path / "a"),
                          telemetry=events, session_id="s"), events


def big_history(cm: ContextManager, turns: int = 20) -> None:
    cm.add([{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "fix the parser"}])
    for i in range(turns):
        cm.add([{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": i})}}]},
            {"role": "tool", "tool_call_id": f"c{i}",
             "content": "".join(f"line {i}.{k}: value = compute({k})\n" for k in range(40))}])


def options(server: ScriptedLLMServer) -> dict[str, Any]:
    return {"model": "openai/gpt-4o", "api_base": server.base_url, "api_key": "t", "max_retries": 0}


def test_litellm_overflow_error_is_recognised() -> None:
    with ScriptedLLMServer([ErrorReply.overflow(9_000, 8_000)]) as server, pytest.raises(Exception) as info:
        litellm.completion(messages=[{"role": "user", "content": "hi"}], **options(server))
    assert type(info.value).__name__ == "ContextWindowExceededError"
    parsed = parse_overflow(info.value)
    assert parsed is not None and (parsed.prompt_tokens, parsed.limit) == (9_000, 8_000)


def test_completion_tool_loop_with_recovery(tmp_path: Path) -> None:
    cm, events = manager(tmp_path)
    big_history(cm)
    script = [Reply.calling(ScriptedToolCall("bash", {"cmd": "pytest"})), "all green"]
    with ScriptedLLMServer(script, context_window=3_000, validator="formats") as server:
        # no tools=: litellm 1.106 imports the optional `mcp` package whenever tools are passed
        first = completion(cm, **options(server))
        assert first.choices[0].message.tool_calls[0].function.name == "bash"
        call = next(m for m in reversed(cm.messages()) if m.role == "assistant").tool_calls[0]
        cm.add(Message.tool(call.id, "3 passed", name="bash"))
        second = completion(cm, **options(server))
    assert second.choices[0].message.content == "all green" and not server.invalid_requests
    assert [r.status for r in server.requests] == [400, 200, 200]
    overflow, = events.of_type(RecoveryOverflow)
    assert overflow.limit == 3_000 and overflow.prompt_tokens == server.requests[0].input_tokens
    assert len(events.of_type(RecoveryRetry)) == 1
    assert cm.usage_total.input == server.requests[1].input_tokens + server.requests[2].input_tokens
    view = cm.messages()
    assert normalize(view) == view and view[-1].text == "all green"


def test_acompletion(tmp_path: Path) -> None:
    cm, _ = manager(tmp_path)
    big_history(cm)
    with ScriptedLLMServer(["done"], context_window=3_000) as server:
        reply = asyncio.run(acompletion(cm, **options(server)))
    assert reply.choices[0].message.content == "done"
    assert [r.status for r in server.requests] == [400, 200] and cm.messages()[-1].text == "done"


def test_stall_guard_and_refused_keywords(tmp_path: Path) -> None:
    cm, _ = manager(tmp_path)
    # Protected: under the limit the error teaches, compaction's last resort would otherwise summarize the request.
    cm.add({"role": "user", "content": "read this: " + "lorem ipsum " * 3_000, "meta": {"protected": True}})
    with ScriptedLLMServer([], context_window=1_000) as server:
        with pytest.raises(RecoveryFailed, match="stall guard"):
            completion(cm, **options(server))
        with pytest.raises(ConfigError, match="messages"):
            completion(cm, messages=[], **options(server))
    assert len(server.requests) == 1


def test_retrieval_opt_in_answers_the_models_read_inside_the_call(tmp_path: Path) -> None:
    rows = "\n".join(f"row {i:05d}: checksum {i * 7919 % 100_003:06d} status ok" for i in range(1, 2_801))
    target = f"row {1_234:05d}: checksum {1_234 * 7919 % 100_003:06d} status ok"

    def handler(request: Any) -> Reply | str:
        last = json.dumps(request.items[-1])
        if target in last and "omitted" not in last:
            return f"found: {target}"
        ref = json.dumps(request.items).split("ref=")[1][:21]
        return Reply.calling(ScriptedToolCall("tool_output_cache", {"ref_id": ref, "offset": 1_234, "limit": 1},
                                              id="call_read"))

    cm, _ = manager(tmp_path)
    cm.add([{"role": "user", "content": "What is the checksum of row 1234?"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "big", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "big", "content": rows}])
    with ScriptedLLMServer(handler=handler, validator="formats") as server:
        response = completion(cm, retrieval_tools=True, **options(server))
        assert response.choices[0].message.content == f"found: {target}"
        assert len(server.requests) == 2
        names = [t["function"]["name"] for t in server.requests[0].body["tools"]]
        assert names == ["tool_output_cache", "tool_output_cache_grep", "history_search"]
        assert target in server.requests[1].items[-1]["content"]
    with pytest.raises(ConfigError, match="add_reply"):
        completion(cm, retrieval_tools=True, add_reply=False, model="openai/gpt-4o")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_provider_limit_below_the_window_is_learned_once_and_the_tools_are_counted(stream: bool) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integrations"))
    from _overflow_runs import PROVIDER_LIMIT, run_case

    outcome = run_case("litellm client", "chat", stream, turns=4)
    assert outcome.error == "" and outcome.completed, outcome
    assert outcome.overflows == outcome.learned == 1 and outcome.largest_after_overflow <= PROVIDER_LIMIT
    assert outcome.streamed == (outcome.requests if stream else 0)
    assert len(outcome.sent_tools) == 12 and outcome.counted_tools == outcome.sent_tools


# -- call ids Anthropic refuses, through litellm --------------------------------------------------------------------

# Ids other servers write (Kimi-style, an MCP server's) that Anthropic refuses (only letters, digits, "_" and "-"),
# beside one that litellm's own clean-up of the first ("." and ":" to "_") would give: two calls, one id.
FOREIGN_IDS = ("functions.bash:0", "functions_bash_0", "srv.tool/1")


def foreign_call_history(cm: ContextManager) -> None:
    cm.add([{"role": "user", "content": "fix the parser"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"n": k})}}
                for k, call_id in enumerate(FOREIGN_IDS)]},
            *({"role": "tool", "tool_call_id": call_id, "content": f"output {k}"}
              for k, call_id in enumerate(FOREIGN_IDS))])


def anthropic_options(server: ScriptedLLMServer) -> dict[str, Any]:
    return {"model": "anthropic/claude-sonnet-4-5", "api_base": server.url, "api_key": "t", "max_retries": 0,
            "max_tokens": 200}


def sent_ids(request_body: dict[str, Any]) -> list[tuple[str, str]]:
    """(block type, id) of every tool_use and tool_result of an Anthropic request body, in order."""
    return [(block["type"], block.get("id") or block.get("tool_use_id"))
            for message in request_body["messages"] if isinstance(message["content"], list)
            for block in message["content"] if block["type"] in ("tool_use", "tool_result")]


def test_call_ids_anthropic_refuses_are_renamed_when_litellm_targets_anthropic(tmp_path: Path) -> None:
    from contextfold.formats import anthropic

    cm, _ = manager(tmp_path)
    foreign_call_history(cm)
    native = anthropic.encode(cm.messages())  # how the native Anthropic path names them
    native_ids = [block["id"] for block in native[1]["content"] if block["type"] == "tool_use"]
    with ScriptedLLMServer(["fixed", "again"], validator="formats") as server:
        first = completion(cm, **anthropic_options(server))
        cm.add({"role": "user", "content": "once more"})
        asyncio.run(acompletion(cm, **anthropic_options(server)))
    assert first.choices[0].message.content == "fixed"
    assert [r.api for r in server.requests] == ["messages", "messages"] and not server.invalid_requests
    expected = [*(("tool_use", i) for i in native_ids), *(("tool_result", i) for i in native_ids)]
    assert sent_ids(server.requests[0].body) == sent_ids(server.requests[1].body) == expected
    assert native_ids[1] == "functions_bash_0" and len(set(native_ids)) == 3
    # the history keeps its own ids: the rename is the request's
    assert [c.id for c in cm.messages()[1].tool_calls] == list(FOREIGN_IDS)


def test_call_ids_stay_as_they_are_for_an_openai_target(tmp_path: Path) -> None:
    cm, _ = manager(tmp_path)
    foreign_call_history(cm)
    with ScriptedLLMServer(["fixed"], validator="formats") as server:
        completion(cm, **options(server))
    assert not server.invalid_requests
    sent = server.requests[0].body["messages"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == list(FOREIGN_IDS)
    assert [m["tool_call_id"] for m in sent[2:5]] == list(FOREIGN_IDS)


def reused_call_history(cm: ContextManager) -> None:
    cm.add({"role": "user", "content": "look the flight up twice"})
    for k in range(2):  # gpt-4o's ids come back in later turns (tau-bench): Anthropic takes each id once
        cm.add([{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_A", "type": "function", "function": {"name": "search", "arguments": json.dumps({"k": k})}}]},
            {"role": "tool", "tool_call_id": "call_A", "content": f"flight {k}"}])


def test_a_call_id_used_again_reaches_anthropic_under_a_name_of_its_own(tmp_path: Path) -> None:
    from contextfold.formats import anthropic

    cm, _ = manager(tmp_path)
    reused_call_history(cm)
    with ScriptedLLMServer(["found"], validator="formats") as server:
        completion(cm, **anthropic_options(server))
    assert not server.invalid_requests
    native = anthropic.encode_request(cm.messages()[:-1])
    assert sent_ids(server.requests[0].body) == sent_ids(native) == [
        ("tool_use", "call_A"), ("tool_result", "call_A"), ("tool_use", "call_A_2"), ("tool_result", "call_A_2")]


def test_claude_served_by_another_provider_gets_the_renames_too(tmp_path: Path) -> None:
    # Azure AI Foundry serves Claude through Anthropic's Messages API (litellm posts to <api_base>/v1/messages):
    # the provider is azure_ai, the rules are Anthropic's
    cm, _ = manager(tmp_path)
    reused_call_history(cm)
    with ScriptedLLMServer(["found"], validator="formats") as server:
        completion(cm, model="azure_ai/claude-sonnet-4-5", api_base=f"{server.url}/v1/messages", api_key="t",
                   max_retries=0, max_tokens=200)
    assert [r.api for r in server.requests] == ["messages"] and not server.invalid_requests
    assert sent_ids(server.requests[0].body) == [
        ("tool_use", "call_A"), ("tool_result", "call_A"), ("tool_use", "call_A_2"), ("tool_result", "call_A_2")]


@pytest.mark.parametrize(("model", "claude"), [
    ("vertex_ai/claude-sonnet-4-5@20250929", True), ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", True),
    ("bedrock/us.anthropic.claude-3-7-sonnet-20250219-v1:0", True), ("openrouter/anthropic/claude-3.5-sonnet", True),
    ("anthropic/claude-sonnet-4-5", True), ("gpt-4o", False), ("vertex_ai/gemini-2.0-flash", False),
    ("bedrock/meta.llama3-70b-instruct-v1:0", False)])
def test_the_model_family_decides_the_renames(model: str, claude: bool) -> None:
    # Vertex AI and Bedrock need Google / AWS sign-in to reach: litellm's own reading of the model is tested here
    from contextfold.formats.openai_chat import with_anthropic_call_ids
    from contextfold.integrations.litellm_client import _sender

    assert (_sender(litellm, {"model": model}) is with_anthropic_call_ids) is claude
