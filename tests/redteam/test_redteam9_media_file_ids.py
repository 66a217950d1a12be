"""Images and documents sent by file id are media too (review9).

Found by review9: the formats keep an image given by a Files API id as it came (Anthropic's ``{"type": "image",
"source": {"type": "file", "file_id": ...}}``, OpenAI Responses' ``input_image`` with ``file_id``: an UnknownPart),
and media limits counted only ImageParts and DocumentParts. An agent uploading its screenshots met "Too much media"
with none of them counted: recovery learned a limit of one item and gave up ("none is left that may go").
"""

from __future__ import annotations

import uuid

from contextfold.formats import get_format
from contextfold.manager import ContextManager
from contextfold.media import MediaLimits, evict_oldest_media, media_of

NONCE = uuid.uuid4().hex[:8]


def _anthropic_shot(k: int) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "text", "text": f"Screenshot {k} ({NONCE})."},
                                        {"type": "image", "source": {"type": "file", "file_id": f"file_{k}_{NONCE}"}}]}


def test_file_images_are_counted_and_the_oldest_leave() -> None:
    messages = get_format("anthropic").decode([_anthropic_shot(k) for k in range(4)])
    assert [media_of(m).items for m in messages] == [1, 1, 1, 1]
    responses = get_format("openai_responses").decode([{"type": "message", "role": "user", "content": [
        {"type": "input_image", "file_id": f"file-r-{NONCE}", "detail": "auto"}]}])
    assert media_of(responses[0]).items == 1
    out, evicted = evict_oldest_media(messages, MediaLimits(max_items=2))
    assert evicted == 3  # (down to 75% of 2: one)
    assert [media_of(m).items for m in out] == [0, 0, 0, 1]
    assert out[0].content[1].text.startswith("[image (")  # type: ignore[union-attr]


def test_a_manager_keeps_file_images_within_a_learned_limit() -> None:
    cm = ContextManager("claude-sonnet-4-5", store="memory")
    try:
        cm.learn_media_limit(max_items=2)
        for k in range(4):
            cm.add(get_format("anthropic").decode([_anthropic_shot(k)]))
            cm.add({"role": "assistant", "content": f"Seen {k}."})
        request = cm.prepare("anthropic")
        files = [b["source"]["file_id"] for m in request["messages"] if isinstance(m["content"], list)
                 for b in m["content"] if b.get("type") == "image"]
        assert files == [f"file_3_{NONCE}"]
    finally:
        cm.close()
