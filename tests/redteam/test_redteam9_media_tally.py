"""The view's media are counted incrementally; settling must not make the count drift from the stored messages.

Found by review9: ``MediaGuard.tally`` counted only what was appended since the last count, keyed on the view's
version and length, but settling rewrites stored messages without a new version (a duplicate tool result dropped, an
"aborted" output inserted for a call the agent moved on from). The count then double-counted a shifted message or
never counted one: a request with 4 images under a learned limit of 3 went out (the guard counted 1), and the
provider's refusal could not be recovered (``keep_media_within_limits`` saw nothing over the limit).
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.manager import ContextManager
from contextfold.media import MediaTally, media_of

NONCE = uuid.uuid4().hex[:8]


def screenshot(step: int) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "text", "text": f"Screenshot {step} ({NONCE})."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + f"{step:04d}QUJD" * 40}}]}


def call(call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "look", "arguments": "{}"}}]}


def stored_media(cm: ContextManager) -> MediaTally:
    total = MediaTally()
    for m in cm.stored_messages():
        total = total + media_of(m)
    return total


def images_sent(view: list[dict[str, Any]]) -> int:
    return sum(1 for m in view if isinstance(m.get("content"), list) for p in m["content"]
               if p.get("type") in ("image", "image_url"))


def test_a_duplicate_result_dropped_by_settling_does_not_hide_the_next_screenshot() -> None:
    cm = ContextManager("claude-sonnet-4-5", store="memory")
    cm.learn_media_limit(max_items=3)
    cm.add({"role": "user", "content": f"Click through the pages ({NONCE})."})
    for step in range(4):
        cm.add(call(f"c{step}-{NONCE}"))
        cm.add({"role": "tool", "tool_call_id": f"c{step}-{NONCE}", "content": "clicked"})
        cm.add({"role": "tool", "tool_call_id": f"c{step}-{NONCE}", "content": "clicked (retried)"})
        cm.prepare()
        cm.add(screenshot(step))
        cm.add({"role": "assistant", "content": f"Seen {step}."})
        view = cm.prepare()
        assert cm.media() == stored_media(cm)
        assert images_sent(view) <= 3


def test_an_aborted_output_inserted_by_settling_does_not_count_a_screenshot_twice() -> None:
    cm = ContextManager("claude-sonnet-4-5", store="memory")
    cm.add({"role": "user", "content": f"Go ({NONCE})."})
    cm.add({"role": "assistant", "content": None, "tool_calls": [
        {"id": f"a-{NONCE}", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": f"b-{NONCE}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
    cm.add({"role": "tool", "tool_call_id": f"a-{NONCE}", "content": "ok"})
    cm.add(screenshot(1))  # the user interrupts while b is pending: settling gives b an "aborted" output before it
    cm.prepare()
    cm.add({"role": "assistant", "content": "Seen."})
    cm.add({"role": "user", "content": "More."})
    cm.prepare()
    assert cm.media() == stored_media(cm) == MediaTally(media_of(cm.stored_messages()[4]).bytes, 1)


# Turns of an agent, each ended by a prepare(): screenshots, calls answered once / twice / never, text replies.
_TURNS = st.lists(st.lists(st.sampled_from(["shot", "call", "call_twice", "call_unanswered", "reply"]),
                           min_size=1, max_size=4), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None)
@given(turns=_TURNS, limit=st.integers(min_value=1, max_value=4))
def test_the_incremental_count_equals_a_fresh_count_after_every_prepare(turns: list[list[str]], limit: int) -> None:
    cm = ContextManager("claude-sonnet-4-5", store="memory")
    cm.learn_media_limit(max_items=limit)
    cm.add({"role": "user", "content": f"Task ({NONCE})."})
    for t, turn in enumerate(turns):
        for k, step in enumerate(turn):
            call_id = f"c{t}.{k}-{NONCE}"
            if step == "shot":
                cm.add(screenshot(10 * t + k))
            elif step == "reply":
                cm.add({"role": "assistant", "content": f"Reply {t}.{k}."})
            else:
                cm.add(call(call_id))
                if step != "call_unanswered":
                    cm.add({"role": "tool", "tool_call_id": call_id, "content": "done"})
                if step == "call_twice":
                    cm.add({"role": "tool", "tool_call_id": call_id, "content": "done again"})
        view = cm.prepare()
        assert cm.media() == stored_media(cm)
        # Every screenshot but the latest user message's may go: the request is within the limit when it can be.
        assert images_sent(view) <= max(limit, 1)
