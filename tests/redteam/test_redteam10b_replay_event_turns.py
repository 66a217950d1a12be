"""``contextfold replay`` of a long session: finding each event's turn walked every turn before it.

The result names the turn of each event (the report's event table) by scanning the turns' first event indices from
the start for every event: events x turns / 2 steps. A recorded session of 3,000 turns (6,163 events) spent 0.73 s
CPU there alone; a history ten times longer (30,000 turns, ~60,000 events) needs a hundred times that, ~73 s, more
than the rest of the result. Counted here as the turn entries read for 2,000 events over 1,000 turns (~1 million on
an unfixed tree; a binary search reads ~11 an event).
"""

from __future__ import annotations

from typing import Any

from contextfold.importers._session import RecordedSession
from contextfold.messages import Message
from contextfold.replay.harness import SessionReplayer

TURNS = 1_000
EVENTS_PER_TURN = 2


class CountingTurns(list[tuple[int, int]]):
    """The replayer's (first event index, turn) list, counting the entries read."""

    reads = 0

    def __iter__(self) -> Any:
        for entry in super().__iter__():
            CountingTurns.reads += 1
            yield entry

    def __getitem__(self, index: Any) -> Any:
        CountingTurns.reads += 1
        return super().__getitem__(index)


def test_each_event_s_turn_is_found_without_walking_every_turn() -> None:
    session = RecordedSession("rt10b-replay-turns", "jsonl", [Message.user("hi"), Message.assistant("ok")])
    replayer = SessionReplayer(session)
    try:
        turns = CountingTurns((EVENTS_PER_TURN * t + (t % 3 == 0), 2 * t + 1) for t in range(TURNS))
        replayer._event_turns = turns
        CountingTurns.reads = 0
        found = [replayer._turn_of(n) for n in range(EVENTS_PER_TURN * TURNS)]
        reads = CountingTurns.reads
    finally:
        replayer.manager.close()
    # The same answers as the walk: the turn of the last entry whose first event index is at most n.
    expected = [max((turn for first, turn in list.__iter__(turns) if first <= n), default=None)
                for n in range(0, EVENTS_PER_TURN * TURNS, 97)]
    assert found[::97] == expected
    assert reads <= 20 * EVENTS_PER_TURN * TURNS, reads
