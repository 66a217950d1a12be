"""A media limit learned from a provider's refusal holds for the next manager of the model (review9).

Found by review9: token limits learned from overflow errors are kept in the store per model (the proxy and fleet
workers run each request on a fresh manager), but media limits lived only in the manager that learned them. Behind
``contextfold serve`` with an upstream taking 4 images, 3 of 13 upstream requests of a 10-turn screenshot session
were refused (one every third turn): each new manager sent too many images again and learned the limit anew. Kept
in the store (``media-limit:<model>``), the next manager of the model evicts before sending.
"""

from __future__ import annotations

import uuid

from contextfold.manager import ContextManager
from contextfold.messages import ImagePart, Message, TextPart
from contextfold.stores.memory import MemoryBlobStore

NONCE = uuid.uuid4().hex[:8]


def _shot(k: int) -> Message:
    return Message.user((TextPart(f"Screenshot {k} ({NONCE})."), ImagePart(data=f"{k:03d}{NONCE}QUJD" * 20,
                                                                           media_type="image/png")))


def _images(messages: list[Message]) -> int:
    return sum(isinstance(p, ImagePart) for m in messages if not isinstance(m.content, str) for p in m.content)


def test_the_next_manager_of_the_model_knows_the_learned_media_limit() -> None:
    store = MemoryBlobStore()
    first = ContextManager("gpt-4o", store=store, archive=None, session_id=f"a-{NONCE}")
    assert first.learn_media_limit(max_items=4)
    first.close()
    later = ContextManager("gpt-4o", store=store, archive=None, session_id=f"b-{NONCE}")
    try:
        for k in range(6):
            later.add(_shot(k))
            later.add(Message.assistant(f"Seen {k}."))
        assert _images(later.prepare_messages()) <= 4
        assert later.media_limits.max_items == 4
    finally:
        later.close()
    other_model = ContextManager("gpt-4o-mini", store=store, archive=None, session_id=f"c-{NONCE}")
    try:
        assert other_model.media_limits.max_items is None  # (per model, as token limits are)
    finally:
        other_model.close()


def test_a_lower_limit_in_the_store_is_kept_and_a_corrupt_record_is_ignored() -> None:
    store = MemoryBlobStore()
    a = ContextManager("gpt-4o", store=store, archive=None, session_id=f"d-{NONCE}")
    b = ContextManager("gpt-4o", store=store, archive=None, session_id=f"e-{NONCE}")
    try:
        a.learn_media_limit(max_items=3)
        b.learn_media_limit(max_items=5, max_bytes=9_000_000)  # (b knew nothing of a's: the store keeps the lowest)
    finally:
        a.close()
        b.close()
    c = ContextManager("gpt-4o", store=store, archive=None, session_id=f"f-{NONCE}")
    try:
        assert (c.media_limits.max_items, c.media_limits.max_bytes) == (3, 9_000_000)
    finally:
        c.close()
    store.put("media-limit:gpt-4o", b"not json")
    d = ContextManager("gpt-4o", store=store, archive=None, session_id=f"g-{NONCE}")
    try:
        assert d.media_limits.max_items is None
    finally:
        d.close()
