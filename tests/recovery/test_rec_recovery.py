"""call_with_recovery against the scripted server through the real openai and anthropic SDKs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from _rec_history import history, manager, tool_turn

from contextfold.compaction import Policy
from contextfold.errors import ConfigError, RecoveryFailed
from contextfold.messages import Message
from contextfold.pairing import normalize
from contextfold.recovery import acall_with_recovery, call_with_recovery, counted_tokens
from contextfold.telemetry import RecoveryGaveUp, RecoveryOverflow, RecoveryRetry
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import ErrorReply

NO_COUNTS = ErrorReply("context_overflow", message="Your input exceeds the context window of this model. Please "
                                                   "adjust your input and try again.")


def chat(server: ScriptedLLMServer) -> Any:
    client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
    return lambda view: client.chat.completions.create(model="gpt-4o", messages=view)


def statuses(server: ScriptedLLMServer) -> list[int]:
    return [r.status for r in server.requests]


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses", "anthropic"])
def test_each_api_overflow_is_recovered_by_compaction(tmp_path: Path, fmt: str) -> None:
    cm, events = manager(tmp_path)
    cm.add(history(20))
    before = counted_tokens(cm)
    with ScriptedLLMServer(["done"], context_window=3_000, validator="formats") as server:
        if fmt == "anthropic":
            client = anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0)
            reply = call_with_recovery(cm, lambda v: client.messages.create(model="m", max_tokens=200, **v),
                                       format=fmt)
            assert reply.content[0].text == "done"
        else:
            oai = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
            if fmt == "openai_chat":
                reply = call_with_recovery(cm, lambda v: oai.chat.completions.create(model="m", messages=v))
                assert reply.choices[0].message.content == "done"
            else:
                reply = call_with_recovery(cm, lambda v: oai.responses.create(model="m", input=v), format=fmt)
                assert reply.output_text == "done"
    assert not server.invalid_requests and server.requests[-1].input_tokens <= 3_000
    retry = events.of_type(RecoveryRetry)[0]
    assert retry.action.startswith("compact") and retry.tokens_before == before and retry.tokens_after < before
    assert not events.of_type(RecoveryGaveUp)
    if fmt == "openai_responses":
        # The Responses API gives no counts: recovery cannot aim at the limit, only shrink until it is accepted.
        assert statuses(server)[-1] == 200 and set(statuses(server)[:-1]) == {400} and len(server.requests) <= 4
    else:
        # With the counts, one retry suffices: compaction, then a drop down to the limit if still needed.
        assert statuses(server) == [400, 200]
        overflow, = events.of_type(RecoveryOverflow)
        assert (overflow.prompt_tokens, overflow.limit) == (server.requests[0].input_tokens, 3_000)
        assert cm.compactions == 1
    view = cm.messages()
    assert normalize(view) == view and view[0].role == "system"


def test_drop_oldest_when_compaction_is_impossible(tmp_path: Path) -> None:
    # The manager's own budget is too small for the protected messages: compaction raises InsufficientBudget.
    policy = Policy(auto=False, allow_on_overflow=True, keep_recent_turns=1, keep_tool_io_pairs=1,
                    exclude_tools=("bash",))  # no masking: this test is about compaction
    cm, events = manager(tmp_path, window=2_500, policy=policy)
    protected = [m.with_meta(protected=True) for m in tool_turn(99, lines=200)]
    cm.add([*history(12), *protected, Message.user("and now?")])
    assert cm.tokens() > 4_000  # over the server's window: the first call overflows
    with ScriptedLLMServer(["done"], context_window=4_000) as server:
        call_with_recovery(cm, chat(server))
    assert statuses(server) == [400, 200]
    retry, = events.of_type(RecoveryRetry)
    assert retry.action.startswith("compaction_failed:InsufficientBudget+drop_oldest:")
    view = cm.messages()
    assert normalize(view) == view
    kept = [m.fingerprint() for m in view if m.protected]
    assert kept == [m.fingerprint() for m in protected]  # protected messages survive, byte for byte
    assert view[0].role == "system" and view[-1].text == "and now?"
    assert cm.failed_compactions == 1 and not cm.paused
    transcripts = list((tmp_path / "archive").rglob("*"))
    assert any(p.is_file() for p in transcripts)  # what was dropped is archived, not lost


def test_stall_guard_fires_when_nothing_can_shrink(tmp_path: Path) -> None:
    cm, events = manager(tmp_path)
    # Protected: under the limit the error teaches, compaction's last resort would otherwise summarize the request.
    huge = Message.user("please read: " + "lorem ipsum dolor " * 1_500).with_meta(protected=True)
    cm.add([Message.system("rules"), huge])
    with ScriptedLLMServer(["never sent"], context_window=2_000) as server, pytest.raises(RecoveryFailed) as info:
        call_with_recovery(cm, chat(server))
    assert "stall guard" in str(info.value) and isinstance(info.value.__cause__, openai.BadRequestError)
    assert statuses(server) == [400]  # no pointless retry
    gave_up, = events.of_type(RecoveryGaveUp)
    assert gave_up.reason.startswith("stall guard") and gave_up.attempts == 1
    assert not events.of_type(RecoveryRetry)


@pytest.mark.parametrize(("old_turns", "stalls"), [(1, True), (8, False)])
def test_stall_guard_threshold(tmp_path: Path, old_turns: int, stalls: bool) -> None:
    # Only the old turns can go; the latest request is huge. 1 small turn is under 5% of the prompt, 8 are over.
    cm, events = manager(tmp_path, policy=Policy(keep_recent_turns=1, keep_tool_io_pairs=0))
    huge = Message.user("please read: " + "lorem ipsum dolor " * 1_000).with_meta(protected=True)
    cm.add([Message.user("start"), *[m for i in range(old_turns) for m in tool_turn(i, lines=3)], huge])
    before = counted_tokens(cm)
    with ScriptedLLMServer([NO_COUNTS, "ok"]) as server:
        if stalls:
            with pytest.raises(RecoveryFailed, match="stall guard"):
                call_with_recovery(cm, chat(server))
        else:
            call_with_recovery(cm, chat(server))
    assert statuses(server) == ([400] if stalls else [400, 200])
    assert bool(events.of_type(RecoveryGaveUp)) == stalls
    if not stalls:
        retry, = events.of_type(RecoveryRetry)
        assert retry.tokens_after is not None and before - retry.tokens_after >= 0.05 * before


def test_gives_up_after_max_retries(tmp_path: Path) -> None:
    # (One retry: a third figureless retry at 60K went under 1/16 of the window, where figureless answers stop
    # shrinking the session sooner: test_rec_figureless_floor.)
    cm, events = manager(tmp_path)
    cm.add(history(40))
    with ScriptedLLMServer([NO_COUNTS] * 2) as server, pytest.raises(RecoveryFailed, match="after 1 retries"):
        call_with_recovery(cm, chat(server), max_retries=1)
    assert statuses(server) == [400] * 2
    sizes = [r.input_tokens for r in server.requests]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]  # every retry was smaller
    assert [e.attempt for e in events.of_type(RecoveryOverflow)] == [1, 2]
    assert len(events.of_type(RecoveryRetry)) == 1 and len(events.of_type(RecoveryGaveUp)) == 1


def test_max_retries_zero_and_invalid(tmp_path: Path) -> None:
    cm, _ = manager(tmp_path)
    cm.add(history(20))  # (over 1/16 of the window: a smaller request refused without figures is not shrunk)
    with ScriptedLLMServer([NO_COUNTS]) as server, pytest.raises(RecoveryFailed, match="after 0 retries"):
        call_with_recovery(cm, chat(server), max_retries=0)
    with pytest.raises(ConfigError, match="max_retries"):
        call_with_recovery(cm, lambda v: v, max_retries=-1)


@pytest.mark.parametrize("allow", [False, True])
def test_auto_off_never_compacts_unless_allowed_on_overflow(tmp_path: Path, allow: bool) -> None:
    cm, events = manager(tmp_path, policy=Policy(auto=False, allow_on_overflow=allow))
    cm.add(history(20))
    before = cm.messages()
    with ScriptedLLMServer(["done"], context_window=3_000) as server:
        if allow:
            call_with_recovery(cm, chat(server))
        else:
            with pytest.raises(RecoveryFailed, match="allow_on_overflow"):
                call_with_recovery(cm, chat(server))
    assert statuses(server) == ([400, 200] if allow else [400])
    assert (cm.messages() == before) is not allow  # "off" is never bypassed, not even by dropping
    assert cm.compactions == int(allow)
    assert bool(events.of_type(RecoveryGaveUp)) is not allow


def test_other_errors_pass_through_untouched(tmp_path: Path) -> None:
    cm, events = manager(tmp_path)
    cm.add(history(2))
    with ScriptedLLMServer([ErrorReply.server_error()]) as server, pytest.raises(openai.InternalServerError):
        call_with_recovery(cm, chat(server))
    assert not events.of_type(RecoveryOverflow) and cm.compactions == 0


def test_async_recovery(tmp_path: Path) -> None:
    cm, events = manager(tmp_path)
    cm.add(history(20))

    async def run(server: ScriptedLLMServer) -> Any:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        try:
            return await acall_with_recovery(cm, lambda v: client.chat.completions.create(model="m", messages=v))
        finally:
            await client.close()

    with ScriptedLLMServer(["done"], context_window=3_000) as server:
        reply = asyncio.run(run(server))
    assert reply.choices[0].message.content == "done" and statuses(server) == [400, 200]
    assert len(events.of_type(RecoveryRetry)) == 1


@pytest.mark.parametrize("name", ["openrouter", "vllm", "llama.cpp", "ollama", "azure"])
def test_openai_compatible_servers_bodies_trigger_recovery(tmp_path: Path, name: str) -> None:
    from test_rec_parse import OPENAI_COMPATIBLE_BODIES

    _, body, _ = OPENAI_COMPATIBLE_BODIES[name]
    cm, events = manager(tmp_path)
    cm.add(history(20))
    failed = {"count": 0}

    def call(view: list[dict[str, Any]]) -> str:
        # the first call fails with the server's real body (as a raw dict, the way an HTTP client without an
        # SDK sees it); the retry succeeds
        if failed["count"] == 0:
            failed["count"] += 1
            raise RuntimeError(body)
        return "ok"

    assert call_with_recovery(cm, call) == "ok"
    assert len(events.of_type(RecoveryRetry)) == 1
