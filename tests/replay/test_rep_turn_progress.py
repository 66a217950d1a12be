"""A single long session shows its turns as it replays (issue 21 §5: a file of many short lines made ``replay``
run past 120 s with the bar still at 0/1 sessions)."""

from __future__ import annotations

import io

import pytest

from contextfold.importers._session import RecordedSession
from contextfold.messages import Message
from contextfold.replay import runner
from contextfold.replay.harness import ReplayOptions
from contextfold.replay.runner import Progress, run_replay


def test_turns_of_a_session_replayed_here_are_drawn_as_they_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "TURN_STEP", 2)
    messages = [m for i in range(6) for m in (Message.user(f"question {i}"), Message.assistant(f"answer {i}"))]
    stream = io.StringIO()
    progress = Progress(1, stream, enabled=True)
    run_replay([RecordedSession("many-lines", "jsonl", messages)], ReplayOptions(window=8_000), jobs=1,
               progress=progress)
    drawn = stream.getvalue().split("\r")
    turns = [line for line in drawn if line.startswith("0/1 sessions; many-lines: ")]
    assert [line.split(": ")[1].split(" turns")[0] for line in turns] == ["1", "2", "4", "6"]
    assert drawn[-1].startswith("[") and "1/1 sessions, 6 turns" in drawn[-1]


def test_nothing_is_drawn_per_turn_when_the_bar_is_off() -> None:
    stream = io.StringIO()
    messages = [Message.user("q"), Message.assistant("a")]
    run_replay([RecordedSession("s", "jsonl", messages)], ReplayOptions(window=8_000), jobs=1,
               progress=Progress(1, stream, enabled=False))
    assert stream.getvalue() == ""
