"""A framework adapter recovers a request refused for its media (LangChain's middleware over the real SDK)."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from contextfold.manager import ContextManager
from contextfold.testing.server import ScriptedLLMServer

NONCE = uuid.uuid4().hex[:8]


def screenshot(step: int) -> str:
    return base64.b64encode(f"PNG-{NONCE}-{step}-".encode() * 40).decode()


def images_of(body: dict[str, Any]) -> list[str]:
    return [part["image_url"]["url"] for m in body["messages"] if isinstance(m.get("content"), list)
            for part in m["content"] if part.get("type") == "image_url"]


def test_langchain_middleware_takes_the_oldest_screenshots_out_after_too_much_media() -> None:
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    from contextfold.integrations.langchain import ContextfoldMiddleware

    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    history: list[dict[str, Any]] = []
    for step in range(12):
        history.append({"role": "user", "content": [
            {"type": "text", "text": f"Screenshot {step} ({NONCE})."},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{screenshot(step)}"}}]})
        history.append({"role": "assistant", "content": f"Seen {step}."})
    history.append({"role": "user", "content": [
        {"type": "text", "text": "And now?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{screenshot(12)}"}}]})
    with ScriptedLLMServer(default="The build is green.", max_media=5) as server:
        model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="t", max_retries=0)  # type: ignore[arg-type]
        agent = create_agent(model, tools=[], middleware=[ContextfoldMiddleware(cm)])
        state = agent.invoke({"messages": history})
        assert state["messages"][-1].content == "The build is green."
        statuses = [r.status for r in server.requests]
        assert statuses == [400, 200]
        assert server.requests[0].response["error"]["message"] == "Too much media: 0 document pages + 13 images > 5"
        sent = images_of(server.requests[1].body)
        # Learned: 5 (our count is the provider's); taken down to 75% of it, the latest screenshots kept whole.
        assert sent == [f"data:image/png;base64,{screenshot(step)}" for step in (10, 11, 12)]
    assert cm.media_limits.max_items == 5


def test_langchain_image_blocks_are_images_and_go_back_unchanged() -> None:
    """Every shape of LangChain image block: counted as an image, not as its base64, and sent back as it came."""
    from langchain_core.messages import HumanMessage

    from contextfold.integrations._langchain_convert import Origins, from_langchain, to_langchain
    from contextfold.messages import ImagePart
    from contextfold.tokens import counter_for_model

    data = screenshot(1) * 100  # ~130 KB of base64: ~100,000 tokens if it were read as text
    blocks: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}", "detail": "high"}},
        {"type": "image_url", "image_url": "https://example.com/a.png"},
        {"type": "image", "source_type": "base64", "data": data, "mime_type": "image/png"},
        {"type": "image", "base64": data, "mime_type": "image/jpeg", "id": "img-1"},
        {"type": "image", "url": "https://example.com/b.png"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
    ]
    origins = Origins()
    message = HumanMessage(content=[{"type": "text", "text": f"look ({NONCE})"}, *blocks], id="h1")
    converted = from_langchain([message], origins)[0]
    assert [type(p).__name__ for p in converted.content] == ["TextPart", *["ImagePart"] * len(blocks)]
    assert [p.media_type for p in converted.content if isinstance(p, ImagePart)] == [
        None, None, "image/png", "image/jpeg", None, "image/png"]
    assert counter_for_model("gpt-4o").count_message(converted) < 10_000
    # A message the manager changed (another text) is rebuilt; its image blocks are the originals, key for key.
    changed = converted.with_content((converted.content[0], *converted.content[1:]))
    rebuilt = to_langchain([changed.with_meta(id="h1-changed")], origins)[0]
    assert rebuilt.content[1:] == blocks


def test_pydantic_ai_images_are_counted_and_the_oldest_leave_after_too_much_media() -> None:
    """pydantic-ai's BinaryContent and ImageUrl: images to the manager; the ones kept go back as the same objects."""
    import asyncio

    from openai import AsyncOpenAI
    from pydantic_ai import Agent, BinaryContent, ImageUrl
    from pydantic_ai import messages as pm
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from contextfold.integrations.pydantic_ai import ContextfoldHistoryProcessor

    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    pictures = [BinaryContent(data=f"PNG-{NONCE}-{step}".encode() * 300, media_type="image/png")
                for step in range(11)]
    history: list[pm.ModelMessage] = []
    for step, picture in enumerate(pictures):
        history.append(pm.ModelRequest(parts=[pm.UserPromptPart([f"Screenshot {step} ({NONCE}).", picture])]))
        history.append(pm.ModelResponse(parts=[pm.TextPart(f"Seen {step}.")]))
    link = ImageUrl(url=f"https://example.com/{NONCE}.png")

    async def run() -> str:
        client = AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))
        processor = ContextfoldHistoryProcessor(cm)
        agent: Agent[None, str] = Agent(model, capabilities=[processor.capability()])
        try:
            return (await agent.run(["And this one?", link], message_history=history)).output
        finally:
            await client.close()

    with ScriptedLLMServer(default="Both pages load.", max_media=6) as server:
        assert asyncio.run(run()) == "Both pages load."
        assert [r.status for r in server.requests] == [400, 200]
        assert server.requests[0].response["error"]["message"] == "Too much media: 0 document pages + 12 images > 6"
        sent = images_of(server.requests[1].body)
    # Down to 75% of 6: the latest three pictures of the history and the new link, each as pydantic-ai sent it.
    expected = [f"data:image/png;base64,{base64.b64encode(p.data).decode()}" for p in pictures[-3:]]
    assert sent == [*expected, link.url]
    assert cm.media_limits.max_items == 6
    assert cm.media().bytes >= 3 * len(expected[0]) - 3 * len("data:image/png;base64,")


def test_pydantic_ai_screenshots_a_tool_returned_are_counted_and_the_oldest_leave() -> None:
    """A tool returning a screenshot (``ToolReturnPart`` with a ``BinaryContent``): an image to the manager.

    It was read as the return's text alone: the screenshots were neither counted nor seen by the media limits, and a
    request refused for too many images could not be recovered ("none is left that may go").
    """
    import asyncio

    from openai import AsyncOpenAI
    from pydantic_ai import Agent, BinaryContent
    from pydantic_ai import messages as pm
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from contextfold.integrations.pydantic_ai import ContextfoldHistoryProcessor

    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    shots = [BinaryContent(data=f"PNG-{NONCE}-tool-{step}".encode() * 300, media_type="image/png")
             for step in range(10)]
    history: list[pm.ModelMessage] = [pm.ModelRequest(parts=[pm.UserPromptPart(f"Check the dashboard ({NONCE}).")])]
    for step, shot in enumerate(shots):
        call_id = f"call_{NONCE}_{step}"
        history.append(pm.ModelResponse(parts=[pm.ToolCallPart("screenshot", {"step": step}, tool_call_id=call_id)]))
        history.append(pm.ModelRequest(parts=[pm.ToolReturnPart("screenshot", [f"step {step} taken", shot],
                                                                tool_call_id=call_id)]))
    history.append(pm.ModelResponse(parts=[pm.TextPart("Seen them all.")]))

    async def run() -> str:
        client = AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))
        processor = ContextfoldHistoryProcessor(cm)
        agent: Agent[None, str] = Agent(model, capabilities=[processor.capability()])
        try:
            return (await agent.run("Which step failed?", message_history=history)).output
        finally:
            await client.close()

    with ScriptedLLMServer(default="Step 7.", max_media=6) as server:
        assert asyncio.run(run()) == "Step 7."
        assert [r.status for r in server.requests] == [400, 200]
        assert server.requests[0].response["error"]["message"] == "Too much media: 0 document pages + 10 images > 6"
        sent = images_of(server.requests[1].body)
    # Down to 75% of 6: the newest four screenshots, as pydantic-ai sent them.
    assert sent == [f"data:image/png;base64,{base64.b64encode(s.data).decode()}" for s in shots[-4:]]
    assert cm.media_limits.max_items == 6
