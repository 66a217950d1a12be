"""drop_oldest: the last-resort shrink keeps every tool call paired and never drops what must stay."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.compaction import Policy
from contextfold.messages import Message, ToolCall
from contextfold.pairing import normalize
from contextfold.recovery import drop_oldest
from contextfold.tokens import counter_for_model

COUNTER = counter_for_model("gpt-4o")
POLICY = Policy(protected_tools=("read_spec",))


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = [Message.system("rules")] if draw(st.booleans()) else []
    n = 0
    for turn in range(draw(st.integers(1, 12))):
        out.append(Message.user(f"request {turn} " + "word " * draw(st.integers(0, 60))))
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(0, 2))):
                n += 1
                calls.append(ToolCall(f"c{n}", draw(st.sampled_from(["bash", "read_spec"])), json.dumps({"n": n})))
            out.append(Message.assistant(f"thinking {n}", calls))
            for call in calls:
                result = Message.tool(call.id, "output " * draw(st.integers(1, 80)), name=call.name)
                out.append(result.with_meta(protected=True) if draw(st.integers(0, 9)) == 0 else result)
    return normalize(out)


def must_stay(messages: list[Message]) -> set[str]:
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    keep = {messages[last_user].fingerprint()}
    keep |= {m.fingerprint() for m in messages if m.role == "system" or m.protected}
    keep |= {m.fingerprint() for m in messages if m.role == "tool" and m.name == "read_spec"}
    return keep


@settings(max_examples=80, deadline=None)
@given(messages=histories(), share=st.floats(0.0, 1.2))
def test_drop_keeps_pairs_and_what_must_stay(messages: list[Message], share: float) -> None:
    total = COUNTER.count_messages(messages)
    target = int(total * share)
    out = drop_oldest(messages, target, COUNTER, POLICY)
    assert normalize(out) == out  # every call answered, no orphan result, opens with the user
    kept = {m.fingerprint() for m in out}
    assert must_stay(messages) <= kept
    if total <= target:
        assert out == messages
    # what stays keeps its order
    order = {id(m): i for i, m in enumerate(messages)}
    positions = [order[id(m)] for m in out if id(m) in order]
    assert positions == sorted(positions)
    # either it fits, or dropping again finds nothing more to drop
    if COUNTER.count_messages(out) > target:
        assert len(drop_oldest(out, target, COUNTER, POLICY)) >= len(out) - 1


def test_drops_the_oldest_first() -> None:
    turns = [Message.user("first " * 50), Message.assistant("a1 " * 50), Message.user("second " * 50),
             Message.assistant("a2 " * 50), Message.user("third")]
    total = COUNTER.count_messages(turns)
    out = drop_oldest(turns, total - 60, COUNTER, Policy())
    assert [m.text.split()[0] for m in out] == ["second", "a2", "third"]
