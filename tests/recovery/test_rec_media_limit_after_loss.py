"""Media limits a manager learned are written again when the store says it may have lost them.

Token limits were (``ProviderLimit.restore_if_lost``, asked before every call); media limits were not: after a Redis
restarted empty, the next manager of the model (another worker, the proxy's next request) sent every image again and
met the provider's refusal again, though the process that learned the limit still knew it.
"""

from __future__ import annotations

from contextfold import ContextManager
from contextfold.messages import Message
from contextfold.stores.memory import MemoryBlobStore

NONCE = "r17-media-loss-Zt8q"
MODEL = "gpt-4o-mini"


class LosingStore(MemoryBlobStore):
    """A memory store that can lose everything (a Redis restarted empty) and says so through ``losses()``."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = 0

    def losses(self) -> int:
        return self.lost

    def wipe(self) -> None:
        for key in [info.key for info in self.entries()]:
            self.delete(key)
        self.lost += 1


def manager(store: LosingStore, session: str) -> ContextManager:
    return ContextManager(MODEL, max_context_tokens=16_000, store=store, archive="memory", session_id=session)


def test_media_limits_are_written_again_after_the_store_lost_them() -> None:
    store = LosingStore()
    cm = manager(store, "s-a")
    assert cm.learn_media_limit(max_items=4)  # (a figure an error named: every caller's)
    assert cm.learn_media_limit(max_items=2, shared=False)  # (what only this session's request taught)
    store.wipe()
    cm.add([Message.user(f"{NONCE} after the restart")])
    cm.prepare("openai_chat")  # (the manager asks the store whether it lost anything before every call)
    assert manager(store, "s-a").media_limits.max_items == 2  # (c04dd8d: None, both gone)
    assert manager(store, "s-b").media_limits.max_items == 4


def test_nothing_is_written_when_nothing_was_lost() -> None:
    store = LosingStore()
    cm = manager(store, "s-a")
    cm.learn_media_limit(max_items=4)
    written = {info.key: store.get(info.key) for info in store.entries() if "media-limit" in info.key}
    cm.add([Message.user(f"{NONCE} a turn")])
    cm.prepare("openai_chat")
    assert {info.key: store.get(info.key) for info in store.entries() if "media-limit" in info.key} == written
