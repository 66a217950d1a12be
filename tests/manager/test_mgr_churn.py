"""Compaction churn in small windows (issue 21 §5): a compaction leaves room for the view to grow.

Each case is the shape a user met: a user-heavy chat at 8K (300-word messages), and a tool-heavy agent at 8K whose
short requests piled up in the verbatim user block.
"""

from __future__ import annotations

import itertools
import json
import random

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import RecordingTelemetry, SpanEvent

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "river", "mountain", "table", "window",
         "garden", "silver", "copper", "invoice", "customer", "order", "ticket")


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) + (str(rng.randint(1, 999)) if rng.random() < 0.1 else "") for _ in range(n))


def manager(window: int, telemetry: RecordingTelemetry) -> ContextManager:
    return ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive="memory", session_id="churn",
                          telemetry=telemetry, message_id_prefix="m")


def compactions(telemetry: RecordingTelemetry) -> list[tuple[int, int]]:
    """(tokens before, tokens after) of every compaction applied, in order."""
    return [(int(e.attributes["tokens_before"]), int(e.attributes["tokens_after"])) for e in telemetry.events
            if isinstance(e, SpanEvent) and e.event in ("compact.soft", "compact.hard", "compact.emergency")
            and e.attributes.get("applied")]


def headroom(cm: ContextManager) -> int:
    """What a hard compaction leaves under hard at least: clear_at_least, or half of hard - soft in small windows."""
    return min(cm.policy.clear_at_least, (cm.budgets.hard - cm.budgets.soft) // 2)


def growth_between(telemetry: RecordingTelemetry) -> list[int]:
    """How much the view grew between one compaction and the next."""
    done = compactions(telemetry)
    return [later[0] - earlier[1] for earlier, later in itertools.pairwise(done)]


def test_a_user_heavy_chat_at_8k_compacts_rarely_and_never_twice_without_growth() -> None:
    # Before: the verbatim user block (20,000 tokens: more than the window) kept every request, and a hard
    # compaction landed a few hundred tokens under hard: 14 compactions in 30 turns, 9 of them back to back.
    rng = random.Random(1)
    telemetry = RecordingTelemetry()
    cm = manager(8_000, telemetry)
    cm.add(Message.system("You are a helpful assistant."))
    for turn in range(30):
        cm.add(Message.user(f"turn {turn}: {words(rng, 300)}"))
        cm.prepare()
        cm.add(Message.assistant(words(rng, 300)))
    room = headroom(cm)
    assert room == 1_300  # half of hard - soft at 8K (6,500 - 3,900), under clear_at_least
    assert 1 <= cm.compactions <= 8, compactions(telemetry)
    assert min(growth_between(telemetry)) >= room, compactions(telemetry)
    # Every compaction left the view at least the headroom under hard.
    assert all(after <= cm.budgets.hard - room for _, after in compactions(telemetry))
    # The latest request is still in the view, whole.
    assert cm.messages()[-1].role == "assistant" and cm.messages()[-2].text.startswith("turn 29: ")


def short_request_history(requests: int) -> list[Message]:
    """A long tool-heavy history: a short request now and then, calls and small results in between."""
    out: list[Message] = [Message.system("You run commands.")]
    for i in range(requests):
        call = ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"step {i}"}))
        out += [Message.user(f"request {i}: please continue with part {i % 97}"),
                Message.assistant(f"running step {i}", [call]),
                Message.tool(call.id, f"step {i} ok"), Message.assistant(f"step {i} done")]
    return out


def test_a_hard_compaction_of_many_short_requests_leaves_room_to_grow() -> None:
    # Before: 1,300 short requests all fitted the 20,000-token user budget, so the user block took whatever the
    # view had and a hard compaction freed almost nothing (385 compactions in a 1,500-turn session at 8K).
    telemetry = RecordingTelemetry()
    cm = manager(8_000, telemetry)
    cm.add(short_request_history(400)[:-1])
    cm.prepare()
    [(before, after)] = compactions(telemetry)
    assert before > cm.budgets.hard
    assert after <= cm.budgets.hard - headroom(cm)
    # Verbatim requests take at most half of the compaction's budget; the newest ones are the ones kept.
    requests = [m.text for m in cm.messages() if m.role == "user" and m.kind is None]
    assert requests[-1] == "request 399: please continue with part 11"
    assert sum(cm.counter.count_message(m) for m in cm.messages() if m.role == "user" and m.kind is None) \
        <= cm.budgets.hard // 2


def test_an_agent_reading_45_pages_at_12k_masks_instead_of_compacting() -> None:
    # Issue 21 §6: an agent reading 45 log pages (~3 KB each) at 12K compacted 22 times with 0 maskings, and warned
    # "compacted N times" on almost every one. Old pages are what masking is for: the view stays under the window
    # with their digests, and no summary is written.
    telemetry = RecordingTelemetry()
    cm = manager(12_000, telemetry)
    cm.add([Message.system("Read the build log pages, then summarize."), Message.user("Why does the build fail?")])
    for page in range(45):
        cm.prepare()
        call = ToolCall(f"c{page}", "read_log", json.dumps({"page": page}))
        log = "\n".join(f"line {i}: compiling module_{page}_{i} ... ok" for i in range(80))
        cm.add([Message.assistant("", [call]), Message.tool(call.id, f"build log page {page}\n{log}", name="read_log")])
    cm.prepare()
    status = cm.status()
    assert cm.compactions <= 2, compactions(telemetry)
    assert status.maskings >= 10
    assert cm.tokens() <= cm.budgets.hard
    assert not [e for e in telemetry.events if "compacted" in getattr(e, "message", "") and "times" in e.message]
