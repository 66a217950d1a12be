"""What a refusal for size teaches of media: stored for the model only where it holds for every caller.

Red team 16 kept a byte limit learned from a small request's ``413`` out of the store when the error named no figure,
but: a provider with a published byte limit (Anthropic's 32 MB) or an error naming a figure above the request
("exceeds 20 MB" of 26 KB) still stored the refused request's size less 15% for the model, stripping every other
caller of its images; a limit kept for the manager only was forgotten by the session's next manager (the proxy's next
request), which sent the images again into the same refusal; and a limit for every caller learned after a lower one
of the manager's own was never stored. Now only the figure the error names is stored for the model (or all of what
a request of at least ``MIN_UNNAMED_BODY_LIMIT`` taught), the rest is kept under the session, and learning a shared
limit stores it whatever the manager holds.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest

from contextfold import ContextManager
from contextfold.cache.owners import Retention
from contextfold.media import MediaLimitInfo
from contextfold.recovery import OverflowRecovery
from contextfold.stores.memory import MemoryBlobStore

NONCE = "f1-media-scope-Vb3r"
CLAUDE = "claude-3-5-sonnet-20241022"
GPT = "gpt-4o-mini"
PUBLISHED_BYTES = 32_000_000  # (Anthropic's)
REFUSED_BYTES = 62_000  # about what the refused request carries (three 16 KB screenshots and its text)


def _png() -> str:
    return base64.b64encode(f"PNG-{NONCE}-".encode() * 500).decode()


def _anthropic_shot(step: int) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "text", "text": f"step {step} {NONCE}"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _png()}}]}


def _chat_shot(step: int) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": f"step {step} {NONCE}"},
                                        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_png()}"}}]}


def manager(model: str, store: Any, session: str) -> ContextManager:
    return ContextManager(model, max_context_tokens=60_000, store=store, archive="memory", session_id=session)


def refused(model: str, store: Any, session: str, info: MediaLimitInfo) -> ContextManager:
    """A session of three 16 KB screenshots whose request got ``info``, recovered."""
    api = "anthropic" if model == CLAUDE else "openai_chat"
    shot = _anthropic_shot if model == CLAUDE else _chat_shot
    cm = manager(model, store, session)
    cm.add([shot(i) if i % 2 == 0 else {"role": "assistant", "content": "ok"} for i in range(5)])
    cm.prepare(api)
    OverflowRecovery(cm, 3, 0).shrink(info, RuntimeError("413"))
    return cm


def test_a_small_requests_413_to_a_provider_with_a_published_limit_stays_with_the_session() -> None:
    store = MemoryBlobStore()
    cm = refused(CLAUDE, store, "r-a", MediaLimitInfo("bytes", "Request Entity Too Large", provider="anthropic",
                                                       status_code=413))
    learned = cm.media_limits.max_bytes
    assert learned is not None and learned < REFUSED_BYTES
    assert manager(CLAUDE, store, "r-b").media_limits.max_bytes == PUBLISHED_BYTES  # (6f2b645: the session's)
    assert manager(CLAUDE, store, "r-a").media_limits.max_bytes == learned  # the session's next manager keeps it


def test_a_named_limit_above_the_request_is_stored_but_not_what_the_request_taught() -> None:
    store = MemoryBlobStore()
    cm = refused(GPT, store, "r-a", MediaLimitInfo("bytes", "Request body exceeds 20 MB", limit=20_000_000,
                                                    provider="openai", status_code=413))
    learned = cm.media_limits.max_bytes
    assert learned is not None and learned < REFUSED_BYTES
    assert manager(GPT, store, "r-b").media_limits.max_bytes == 20_000_000  # (6f2b645: the session's ~53 KB)
    assert manager(GPT, store, "r-a").media_limits.max_bytes == learned


def test_a_named_limit_below_the_request_is_still_stored_for_the_model() -> None:
    store = MemoryBlobStore()
    cm = refused(GPT, store, "r-a", MediaLimitInfo("bytes", "Request body exceeds 30 KB", limit=30_000,
                                                    provider="openai", status_code=413))
    assert cm.media_limits.max_bytes == 30_000
    assert manager(GPT, store, "r-b").media_limits.max_bytes == 30_000


@pytest.mark.parametrize(("limit", "sent", "stored"), [
    (3, None, None),  # (the request's 3 images within "Max is 3": a figure it did not exceed, a client's echo maybe)
    (2, None, 2),  # (over it by our count)
    (5, 7, 5),  # (over it by the error's own count: a document's pages)
])
def test_an_item_figure_is_stored_for_the_model_only_when_the_request_exceeded_it(
        limit: int, sent: int | None, stored: int | None) -> None:
    store = MemoryBlobStore()
    cm = refused(GPT, store, f"r-items-{limit}", MediaLimitInfo(
        "items", f"Too many images in request. Max is {limit} ({NONCE})", limit=limit, sent=sent, provider="openai"))
    assert cm.media_limits.max_items is not None and cm.media_limits.max_items < 3  # (the session keeps under it)
    assert manager(GPT, store, f"r-other-{limit}").media_limits.max_items == stored  # (db7922a: 3 for the first)


def test_a_limit_for_every_caller_is_stored_after_a_lower_one_of_the_managers_own() -> None:
    store = MemoryBlobStore()
    cm = manager(GPT, store, "r-a")
    cm.learn_media_limit(max_bytes=9_000, shared=False)
    cm.learn_media_limit(max_bytes=2_000_000)
    assert cm.media_limits.max_bytes == 9_000
    assert manager(GPT, store, "r-b").media_limits.max_bytes == 2_000_000  # (6f2b645: None)
    assert manager(GPT, store, "r-a").media_limits.max_bytes == 9_000


def test_a_sessions_own_media_limit_goes_with_the_session_at_retention() -> None:
    store = MemoryBlobStore()
    cm = manager(GPT, store, "old-session")
    cm.learn_media_limit(max_bytes=2_000_000)
    cm.learn_media_limit(max_bytes=9_000, shared=False)
    assert cm.cache is not None
    cm.cache.retention = Retention(max_age_s=3600, max_bytes=None)
    cm.cache.retain(now=time.time() + 2 * 3600)
    assert manager(GPT, store, "old-session").media_limits.max_bytes == 2_000_000  # (the model's part stays)
