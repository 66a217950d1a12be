"""A LangChain image block's round-trip record stays LangChain's: never a key of a provider request (review9).

Found by review9: since LangChain image blocks became ImageParts, the part's ``extra`` held the block without its
payload (``langchain_image``) untagged, and an extra without a format tag passes through every wire encoder: a
manager fed by LangChain and prepared for a provider (``cm.prepare()``, a wrapper, the proxy) sent
``"langchain_image": {...}`` inside each image part, a key OpenAI and Anthropic refuse. Tagged with the LangChain
format, it is dropped by every other encoder and still brings the block back to LangChain key for key.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from contextfold.formats import get_format
from contextfold.integrations._langchain_convert import IMAGE_KEY, Origins, from_langchain, to_langchain

NONCE = uuid.uuid4().hex[:8]


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses", "anthropic"])
def test_a_langchain_image_is_sent_without_the_record_of_its_block(fmt: str) -> None:
    from langchain_core.messages import HumanMessage

    blocks: list[dict[str, Any]] = [
        {"type": "image", "source_type": "base64", "data": "QUJD" * 10, "mime_type": "image/png"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "QUJD" * 10, "detail": "low"}},
    ]
    origins = Origins()
    message = HumanMessage(content=[{"type": "text", "text": f"look ({NONCE})"}, *blocks], id=f"h-{NONCE}")
    converted = from_langchain([message], origins)[0]
    assert IMAGE_KEY not in _keys(get_format(fmt).encode([converted]))
    rebuilt = to_langchain([converted.with_meta(id=f"h-{NONCE}-changed")], origins)[0]
    assert rebuilt.content[1:] == blocks
