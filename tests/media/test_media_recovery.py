"""Requests refused for their media: recovered, learned, and never sent again (the agent takes screenshots).

Anthropic refuses a Messages request over 32 MB with ``413 request_too_large`` and one with more than 100 images
with ``Too much media: 0 document pages + 101 images > 100``; an agent that takes a screenshot per step meets either
within an hour, and before contextfold recognised them every later call failed the same way: the session was dead.
The scripted server enforces both limits on loopback and answers the providers' real error bodies; the real SDKs
raise their real errors.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import anthropic
import openai
import pytest

from contextfold.errors import RecoveryFailed
from contextfold.manager import ContextManager
from contextfold.media import LOW_WATER
from contextfold.recovery import call_with_recovery
from contextfold.telemetry import MediaEvicted, RecordingTelemetry, RecoveryMediaLimit
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

NONCE = uuid.uuid4().hex[:8]


def screenshot(step: int, size: int) -> str:
    """A distinct base64 "PNG" of ``size`` characters for step ``step``."""
    raw = f"PNG-{NONCE}-step-{step}-".encode() * (size // 20 + 1)
    return base64.b64encode(raw).decode()[:size]


def chat_screenshot(step: int, size: int) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "text", "text": f"Screenshot after step {step} ({NONCE})."},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{screenshot(step, size)}"}}]}


def sent_images(body: dict[str, Any]) -> list[str]:
    """The data URLs / base64 data of every image a request carried, in order."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            if value.get("type") == "image_url":
                found.append(value["image_url"]["url"])
            elif value.get("type") == "image":
                found.append(value["source"]["data"])
            else:
                for item in value.values():
                    walk(item)

    walk(body.get("messages"))
    return found


def test_too_many_images_is_learned_once_and_the_oldest_screenshots_leave() -> None:
    """OpenAI Chat at a server taking 10 images: one refusal, then every call goes through with the latest ones."""
    telemetry = RecordingTelemetry()
    cm = ContextManager("gpt-4o", store="memory", archive="memory", telemetry=telemetry)
    steps = 16
    with ScriptedLLMServer(default="Next step.", max_media=10) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        cm.add({"role": "user", "content": f"Click through the settings pages ({NONCE})."})
        for step in range(steps):
            cm.add(chat_screenshot(step, 2_000))
            reply = call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
            cm.add(reply.choices[0].message.model_dump(exclude_none=True))
        refused = [r for r in server.requests if r.status != 200]
        assert len(refused) == 1
        assert refused[0].response["error"]["message"] == "Too much media: 0 document pages + 11 images > 10"
        accepted = [r for r in server.requests if r.status == 200]
        assert len(accepted) == steps
        for request in accepted:
            images = sent_images(request.body)
            assert len(images) <= 10
            # The latest screenshot is always there, whole.
            step = len([m for m in request.body["messages"] if m["role"] == "user"]) - 2
            assert images[-1] == f"data:image/png;base64,{screenshot(step, 2_000)}"
    # What the error taught: strictly fewer than the 11 sent, and evictions go down to LOW_WATER of it.
    assert cm.media_limits.max_items == 10
    last = server.requests[-1].body["messages"]
    kept = sent_images(server.requests[-1].body)
    assert len(kept) <= 10
    placeholders = [p["text"] for m in last if isinstance(m["content"], list) for p in m["content"]
                    if p["type"] == "text" and p["text"].startswith("[image")]
    assert placeholders[0] == ("[image (image/png, 2 KB) removed from the request to stay within the provider's "
                               "media limits; kept in the archive]")
    assert len(placeholders) + len(kept) == steps
    learned = telemetry.of_type(RecoveryMediaLimit)
    assert [(e.measure, e.limit, e.sent, e.max_items) for e in learned] == [("items", 10, 11, 10)]
    evicted = telemetry.of_type(MediaEvicted)
    assert evicted and evicted[0].items_after <= int(10 * LOW_WATER)
    # Nothing is lost: the archive holds every screenshot whole.
    cm.finish()
    assert cm.archive is not None
    archived = "".join(repr(m.content) for _, messages in cm.archive.transcripts(cm.session_id) for m in messages)
    assert all(screenshot(step, 2_000) in archived for step in range(steps))


def test_a_request_over_the_byte_limit_is_recovered_with_anthropic() -> None:
    """413 request_too_large from the Messages API: learned below the rejected size, never met again."""
    telemetry = RecordingTelemetry()
    cm = ContextManager("claude-sonnet-4-5", store="memory", archive="memory", telemetry=telemetry)
    size = 60_000
    steps = 20
    script: list[Reply | str] = [Reply.calling(ScriptedToolCall("screenshot", {}, id=f"toolu_{NONCE}_{step}"))
                                 for step in range(steps)]
    with ScriptedLLMServer(script, max_request_bytes=400_000) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0)
        cm.add({"role": "user", "content": f"Find the failing build in the dashboard ({NONCE})."})
        for step in range(steps):
            reply = call_with_recovery(cm, lambda view: client.messages.create(
                model="scripted-model", max_tokens=1_000, **view), format="anthropic")
            cm.add({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
                   format="anthropic")
            call = next(b for b in reply.content if b.type == "tool_use")
            cm.add({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": screenshot(step, size)}}]}]}, format="anthropic")
        refused = [r for r in server.requests if r.status != 200]
        assert len(refused) == 1 and refused[0].status == 413
        assert refused[0].response["error"]["type"] == "request_too_large"
        assert all(r.size is not None and r.size <= 400_000 for r in server.requests if r.status == 200)
    limit = cm.media_limits.max_bytes
    assert limit is not None and limit < refused[0].size  # type: ignore[operator]
    assert [e.measure for e in telemetry.of_type(RecoveryMediaLimit)] == ["bytes"]


def test_published_limits_keep_an_anthropic_session_under_100_images_without_an_error() -> None:
    """claude-*: Anthropic's 100 images per request is known, so no request ever carries more."""
    cm = ContextManager("claude-sonnet-4-5", store="memory", archive="memory")

    def step_messages(step: int) -> list[dict[str, Any]]:
        return [{"role": "user", "content": [
                    {"type": "text", "text": f"step {step} {NONCE}"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": screenshot(step, 200)}}]},
                {"role": "assistant", "content": f"done {step}"}]

    # A resumed session: 98 screenshots already in the history, then the agent goes on.
    cm.add([m for step in range(98) for m in step_messages(step)], format="anthropic")
    with ScriptedLLMServer(default="ok", max_media=100) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0)
        for step in range(98, 106):
            cm.add(step_messages(step)[:1], format="anthropic")
            reply = client.messages.create(model="scripted-model", max_tokens=100, **cm.prepare("anthropic"))
            cm.add({"role": "assistant", "content": reply.content[0].text})
        assert all(r.status == 200 for r in server.requests)
        counts = [len(sent_images(r.body)) for r in server.requests]
        assert counts[:3] == [99, 100, 75]  # over 100 at the third: down to LOW_WATER of it at once
        assert max(counts) == 100
    assert cm.media().items <= 100


def test_the_latest_request_alone_over_the_limit_gives_up_with_the_reason() -> None:
    """Nothing may go (the request being served holds every image): RecoveryFailed naming why, no loop."""
    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    with ScriptedLLMServer(default="ok", max_media=2) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        cm.add({"role": "user", "content": [
            {"type": "text", "text": f"Compare these ({NONCE})."},
            *({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{screenshot(i, 100)}"}}
              for i in range(3))]})
        with pytest.raises(RecoveryFailed, match="none is left that may go") as raised:
            call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
        assert isinstance(raised.value.__cause__, openai.BadRequestError)
        assert len(server.requests) == 1
    assert len(sent_images(server.requests[0].body)) == 3


def test_an_error_naming_a_limit_of_0_mb_does_not_teach_a_limit_that_no_request_can_meet() -> None:
    """"Request too large (max 0 MB)": a figure no request meets (its text alone is over it) is not learned.

    Learned as is, it became a 1-byte limit, stored for the model: every image of every later session of the model
    was evicted. The limit learned is a share below the rejected request instead, and the newest image stays.
    """
    from contextfold.testing.wire import ErrorReply

    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    for step in range(3):
        cm.add([chat_screenshot(step, 60_000), {"role": "assistant", "content": f"seen {step} {NONCE}"}])
    cm.add({"role": "user", "content": f"Which step broke the build? ({NONCE})"})
    refusal = ErrorReply("request_too_large", "Request too large (max 0 MB)")
    with ScriptedLLMServer([refusal, "step 1"]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
        assert [r.status for r in server.requests] == [413, 200]
        retried = sent_images(server.requests[1].body)
    limit = cm.media_limits.max_bytes
    assert limit is not None and limit > 100_000
    assert retried == [f"data:image/png;base64,{screenshot(step, 60_000)}" for step in (2,)]
