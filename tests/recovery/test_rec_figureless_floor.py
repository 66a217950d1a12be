"""An upstream answering "too long" without figures to every request must not brick the session (s19h).

On afa4c7c each such answer shrank the session's learned limit again (15%, 30%, 50% below the rejected request, on
every call) down to a few dozen tokens; the manager then refused every later request itself (InsufficientBudget),
never asking the upstream again, and an odd figure ("limit 64 tokens") was shared with every session of the model.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import openai
import pytest
from _rec_history import Clock, history, session

from contextfold.errors import ContextfoldError, RecoveryFailed
from contextfold.recovery import call_with_recovery
from contextfold.stores import MemoryBlobStore
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import ErrorReply

WORDING = "Your input exceeds the context window of this model."
REFUSED = ErrorReply("context_overflow", message=WORDING)
# (manager._limits.PROVISIONAL_LIMIT_SECONDS and recovery.MIN_WINDOW_SHARE, written out: the tests run on afa4c7c too)
PROVISIONAL_LIMIT_SECONDS = 15 * 60
MIN_WINDOW_SHARE = 1 / 16


def test_figureless_refusals_never_shrink_the_session_under_the_floor_and_every_turn_asks_the_upstream(
        tmp_path: Path) -> None:
    cm = session(tmp_path)
    cm.add(history(30, lines=60))
    least = int(cm.budgets.hard * MIN_WINDOW_SHARE)
    with ScriptedLLMServer([], default=REFUSED) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        for turn in range(6):
            asked = len(server.requests)
            with pytest.raises(ContextfoldError) as failed:
                call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
            # Each turn reaches the upstream (afa4c7c: from the second turn on, InsufficientBudget and no request),
            # and the caller is told what the provider answered.
            assert isinstance(failed.value, RecoveryFailed) and WORDING in str(failed.value)
            assert len(server.requests) > asked
            assert cm.learned_limit is not None and cm.learned_limit >= least  # (afa4c7c: 51 tokens)
            cm.add({"role": "user", "content": f"try again {turn}"})
        # Bounded: once down at the floor, one request a turn (no more shrinking retries).
        assert len(server.requests) - asked == 1
        server.default = "fine again"
        reply = call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
    assert reply.choices[0].message.content == "fine again"


def test_a_figureless_limit_expires_and_the_window_comes_back(tmp_path: Path) -> None:
    clock = Clock()
    store = MemoryBlobStore()
    cm = session(tmp_path, store, clock)
    cm.add(history(30, lines=60))
    window_hard = cm.budgets.hard
    with ScriptedLLMServer([REFUSED, "ok"]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
    learned = cm.learned_limit
    assert learned is not None and cm.budgets.hard <= learned < window_hard
    # The session's next manager (the proxy builds one per request) keeps it while it holds...
    assert session(tmp_path, store, clock).learned_limit == learned
    assert session(tmp_path, store, clock, sid="other").learned_limit is None  # ...and no other session gets it.
    clock.at += timedelta(seconds=PROVISIONAL_LIMIT_SECONDS + 1)
    cm.prepare("openai_chat")
    assert cm.learned_limit is None and cm.budgets.hard == window_hard  # afa4c7c: kept for good
    assert session(tmp_path, store, clock).learned_limit is None


def test_a_stated_limit_is_still_learned_at_once_and_kept(tmp_path: Path) -> None:
    clock = Clock()
    store = MemoryBlobStore()
    cm = session(tmp_path, store, clock)
    cm.add(history(30, lines=60))
    stated = ErrorReply("context_overflow", prompt_tokens=26_000, limit=16_000)
    with ScriptedLLMServer([stated, "ok"]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
    learned = cm.learned_limit
    assert learned is not None and learned < 16_000 and [r.status for r in server.requests] == [400, 200]
    clock.at += timedelta(seconds=PROVISIONAL_LIMIT_SECONDS + 1)
    cm.prepare("openai_chat")
    assert cm.learned_limit == learned
    assert session(tmp_path, store, clock, sid="other").learned_limit == learned  # shared with the model


def test_an_implausibly_small_stated_limit_stays_with_the_session(tmp_path: Path) -> None:
    store = MemoryBlobStore()
    cm = session(tmp_path, store)
    cm.add(history(30, lines=60))
    odd = ErrorReply("context_overflow", prompt_tokens=26_000, limit=300)
    with ScriptedLLMServer([], default=odd) as server, pytest.raises(ContextfoldError):
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
    assert cm.learned_limit is not None and cm.learned_limit < 300  # learned at once, by this session
    other = session(tmp_path, store, sid="other")
    assert other.learned_limit is None  # afa4c7c: every session of the model under ~270 tokens


def test_an_error_counting_the_request_thousands_of_times_ours_does_not_brick_the_session(tmp_path: Path) -> None:
    # A plausible limit with an absurd count of the request (900M tokens for ~26K of ours): afa4c7c learned a
    # 3-token limit for the session and refused every later call itself (InsufficientBudget, no request).
    cm = session(tmp_path, window=128_000)
    cm.add(history(30, lines=60))
    odd = ErrorReply("context_overflow", prompt_tokens=900_000_000, limit=128_000)
    with ScriptedLLMServer([odd], default="ok") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        for turn in range(3):
            call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
            cm.add({"role": "user", "content": f"next {turn}"})
    assert [r.status for r in server.requests] == [400, 200, 200, 200]
    assert cm.learned_limit is None or cm.learned_limit >= cm.budgets.hard >= 128_000 / 16


def test_a_stated_limit_far_over_the_refused_request_is_not_kept_for_good(tmp_path: Path) -> None:
    # "maximum context length is 128000 tokens" (no count of the request) for ~26K tokens of ours: afa4c7c kept the
    # session under 95% of that request for its whole life (its own record, durable).
    clock = Clock()
    store = MemoryBlobStore()
    cm = session(tmp_path, store, clock, window=128_000)
    cm.add(history(30, lines=60))
    odd = ErrorReply("context_overflow", message="This model's maximum context length is 128000 tokens. Please "
                                                 "reduce the length of the messages.")
    with ScriptedLLMServer([odd, "ok"]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
    rejected = server.requests[0].input_tokens
    assert cm.learned_limit is not None and cm.learned_limit < rejected  # the retry and this while stay under it
    clock.at += timedelta(seconds=PROVISIONAL_LIMIT_SECONDS + 1)
    cm.prepare("openai_chat")
    assert cm.learned_limit is None or cm.learned_limit > 2 * rejected
    assert session(tmp_path, store, clock, window=128_000).learned_limit == cm.learned_limit  # (its next manager)
