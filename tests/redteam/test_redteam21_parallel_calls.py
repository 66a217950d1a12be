"""A turn of thousands of parallel tool calls: planning a compaction walks the answered unit once, not once per result.

Found by the twenty-first red team (a history of a shape no test had: one assistant message calling 4,000 tools in
parallel, every result answered). The answered message is that call and all its results, one unit; ``recent_indices``
added the whole unit to what stays once per answered index, for each of the ~60 fitting attempts of a hard
compaction: results² × attempts. On 8c274dd the first ``prepare()`` of that history took 1.4 s of CPU at 1,000 calls,
5.4 s at 2,000 and 19.4 s at 4,000 (0.08 / 0.11 / 0.26 s after).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from contextfold.compaction._partition import Keep, Unit, partition, recent_indices
from contextfold.compaction.policy import Policy
from contextfold.messages import Message, ToolCall

NONCE = "rt21-parallel-7c41"
CALLS = 400


class _CountedIndices(tuple[int, ...]):
    """A unit's indices that count how often they are walked whole."""

    walks = 0

    def __iter__(self) -> Iterator[int]:
        type(self).walks += 1
        return super().__iter__()


def _history() -> list[Message]:
    calls = tuple(ToolCall(f"c{i}", "read_file", json.dumps({"path": f"{NONCE}/{i}.txt"})) for i in range(CALLS))
    return [Message(role="system", content="You are a coding agent."),
            Message(role="user", content=f"Read every file under {NONCE}."),
            Message(role="assistant", content="", tool_calls=calls),
            *(Message(role="tool", tool_call_id=f"c{i}", name="read_file", content=f"{NONCE} line {i}")
              for i in range(CALLS))]


def test_the_answered_unit_of_many_parallel_results_is_walked_once() -> None:
    history = _history()
    part = partition(history, Policy(), [len(m.text) // 4 + 3 for m in history])
    answered = part.answered if part.answered is not None else ()
    assert len(answered) == CALLS + 1  # the call and every result
    (at,) = [k for k, unit in enumerate(part.units) if answered[0] in unit.indices]
    part.units[at] = Unit(_CountedIndices(part.units[at].indices), io=part.units[at].io)
    _CountedIndices.walks = 0
    kept = recent_indices(history, part, Keep(turns=1, pairs=0, user_budget=0, retain_last=0))
    assert set(answered) <= kept
    # Once to keep it (the pairs and turns rules read other units); on 8c274dd once per answered index: 401.
    assert _CountedIndices.walks <= 2
