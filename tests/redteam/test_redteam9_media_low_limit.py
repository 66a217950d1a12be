"""A server taking one image per request (vLLM's default ``limit_mm_per_prompt``): the newest screenshot stays.

Found by review9: eviction goes down to 75% of the item limit, ``int(1 * 0.75) == 0`` for a limit of one, so every
image went, the newest too: a computer-use agent whose screenshots come back as tool results saw none of them
every other turn (two images over a limit of one: both taken out).
"""

from __future__ import annotations

import uuid

import pytest

from contextfold.manager import ContextManager
from contextfold.media import MediaLimits, evict_oldest_media
from contextfold.messages import ImagePart, Message, TextPart, ToolCall

NONCE = uuid.uuid4().hex[:8]


def shot(k: int) -> str:
    return f"{k:03d}{NONCE}QUJD" * 30


def images_in(messages: list[Message]) -> list[str]:
    return [p.data or "" for m in messages if not isinstance(m.content, str) for p in m.content
            if isinstance(p, ImagePart)]


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_the_newest_screenshot_of_a_tool_result_is_always_sent(limit: int) -> None:
    cm = ContextManager("claude-sonnet-4-5", store="memory")
    cm.learn_media_limit(max_items=limit)
    cm.add(Message(role="user", content=f"Use the computer ({NONCE})."))
    for k in range(5):
        call_id = f"s{k}-{NONCE}"
        cm.add(Message(role="assistant", content="", tool_calls=(ToolCall(id=call_id, name="screenshot",
                                                                           arguments="{}"),)))
        cm.add(Message(role="tool", tool_call_id=call_id,
                       content=(TextPart(f"Screenshot {k}."), ImagePart(data=shot(k), media_type="image/png"))))
        sent = images_in(cm.prepare_messages())
        assert sent and sent[-1] == shot(k)
        assert len(sent) <= limit


def test_eviction_for_a_limit_of_one_keeps_one() -> None:
    messages = [Message(role="user", content=(TextPart(f"s{k}"), ImagePart(data=shot(k)))) for k in range(3)]
    out, evicted = evict_oldest_media(messages, MediaLimits(max_items=1))
    assert (evicted, images_in(out)) == (2, [shot(2)])
