"""A limit learned from an overflow error naming none is kept under the session, for its later managers.

Red team 16 stopped storing such a limit for the model (one caller's refusal shrank every caller's window), and kept
it in the manager only: the session's next manager on the same store (the proxy builds one per request, a fleet's
next worker, a restarted process) had forgotten it, and met the provider's refusal again each time the view grew
past it (through the proxy: 12 refusals in 40 turns instead of 1). It is kept under the session now, as the part of
a limit one request's ``max_tokens`` took off is, and still read by no other session. A model with no record costs
one round trip, as before: the session's own record is read only where the model has a record (a marker naming no
limit when no limit holds for every caller).
"""

from __future__ import annotations

from typing import Any

from contextfold import ContextManager
from contextfold.messages import Message
from contextfold.recovery import OverflowInfo, OverflowRecovery
from contextfold.stores.memory import MemoryBlobStore

NONCE = "f1-session-limit-Qx7v"
MODEL = "gpt-4o-mini"
WINDOW = 16_000
FIGURELESS = "Your input exceeds the context window of this model. Please adjust your input and try again."


class CountingStore(MemoryBlobStore):
    """A memory store that counts its reads, and can lose everything (a Redis restarted empty)."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: list[str] = []
        self.lost = 0

    def get(self, key: str) -> bytes:
        self.gets.append(key)
        return super().get(key)

    def losses(self) -> int:
        return self.lost

    def wipe(self) -> None:
        for key in [info.key for info in self.entries()]:
            self.delete(key)
        self.lost += 1


def manager(store: Any, session: str) -> ContextManager:
    return ContextManager(MODEL, max_context_tokens=WINDOW, store=store, archive="memory", session_id=session)


def refused_once(store: Any, session: str) -> int:
    """A session whose request the provider refused without naming its limit; the limit it learned."""
    cm = manager(store, session)
    # (The bulk before the latest request: a limit without figures is never inferred under what must stay.)
    cm.add([Message.user(f"{NONCE} {session} " + "word " * 3_000), Message.assistant("read"),
             Message.user("go on")])
    cm.prepare("openai_chat")
    OverflowRecovery(cm, 3, 0).shrink(OverflowInfo(FIGURELESS, "openai"), RuntimeError("refused"))
    learned = cm.learned_limit
    assert learned is not None and learned < 3_100
    return learned


def test_the_sessions_next_manager_keeps_a_figureless_limit_and_no_other_session_gets_it() -> None:
    store = MemoryBlobStore()
    learned = refused_once(store, "s-a")
    again = manager(store, "s-a")
    assert again.learned_limit == learned  # (6f2b645: None, the limit forgotten)
    again.add([Message.user(f"{NONCE} next turn")])
    again.prepare("openai_chat")
    assert again.budgets.hard <= learned
    assert manager(store, "s-b").learned_limit is None


def test_a_lower_figureless_limit_of_one_session_stays_below_the_models_shared_one() -> None:
    store = MemoryBlobStore()
    assert manager(store, "s-shared").learn_limit(9_000)  # (a limit some error named: the model's)
    cm = manager(store, "s-a")
    assert cm.learn_limit(2_000, shared=0)
    assert (manager(store, "s-a").learned_limit, manager(store, "s-b").learned_limit) == (2_000, 9_000)


def test_a_model_with_no_record_still_costs_one_round_trip() -> None:
    store = CountingStore()
    assert manager(store, "s-fresh").learned_limit is None
    assert [key for key in store.gets if "limit" in key] == [f"limit:{MODEL}"]


def test_a_figureless_limit_is_written_again_after_the_store_lost_it() -> None:
    store = CountingStore()
    cm = manager(store, "s-a")
    assert cm.learn_limit(2_000, shared=0)
    store.wipe()
    cm.add([Message.user(f"{NONCE} after the restart")])
    cm.prepare("openai_chat")  # (the manager asks the store whether it lost anything before every call)
    assert manager(store, "s-a").learned_limit == 2_000
    assert manager(store, "s-b").learned_limit is None


def test_forgetting_forgets_a_figureless_limit_too() -> None:
    store = MemoryBlobStore()
    cm = manager(store, "s-a")
    cm.learn_limit(2_000, shared=0)
    cm.forget_learned_limit()
    assert manager(store, "s-a").learned_limit is None


def test_a_named_limit_learned_after_a_figureless_one_replaces_the_marker() -> None:
    store = MemoryBlobStore()
    assert manager(store, "s-a").learn_limit(2_000, shared=0)
    assert manager(store, "s-b").learn_limit(9_000)
    assert (manager(store, "s-a").learned_limit, manager(store, "s-c").learned_limit) == (2_000, 9_000)
