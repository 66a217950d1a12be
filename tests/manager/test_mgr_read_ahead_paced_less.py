"""The read-ahead pauses once per 2 ms of its work, not per 0.5 ms (issue 22).

It runs while the agent waits for its model; each pause (a sleep that gives the GIL away) cost the background thread
~40-65 us of CPU, 1,552 pauses in the lm32b loop at 16K with 0.5 ms slices (~8% of the read-ahead at load 8). The
clock is a fake one that moves only with the work done, so the test does not depend on the machine's speed.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contextfold.manager._compactor import warm_for_compaction
from contextfold.messages import Message
from contextfold.redact import Redactor, SecretMemory
from contextfold.telemetry import _pace

SLICE_S = 0.002  # (contextfold.telemetry._pace.READ_AHEAD_SLICE_S)
WORK_PER_MESSAGE_S = 0.0006  # what reading one message costs on the fake clock (more than a 0.5 ms slice)


class _FakeTime:
    """A clock moved only by the work (``spend``); ``sleep`` counts the pauses and takes no time."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.pauses = 0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses += 1

    def spend(self, seconds: float) -> None:
        self.now += seconds


def test_the_read_ahead_pauses_once_per_two_ms_of_work(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    clock = _FakeTime()
    monkeypatch.setattr(_pace, "time", clock)
    import contextfold.summarize.digest as digest

    read = digest.read_message

    def costly(m: Message) -> object:
        clock.spend(WORK_PER_MESSAGE_S)
        return read(m)

    monkeypatch.setattr(digest, "read_message", costly)
    messages = [Message.user(f"step {i} of paced-{nonce}: look at module_{nonce}_{i}.py") for i in range(40)]
    warm_for_compaction(messages, True, None, False)
    work = WORK_PER_MESSAGE_S * len(messages)  # 24 ms of work
    assert clock.pauses <= work / SLICE_S + 1  # 12 at most (40 with 0.5 ms slices, on 6775dcc)
    assert clock.pauses >= work / (2 * SLICE_S)  # it still pauses (the agent may want the GIL)


def test_the_read_ahead_redaction_pauses_once_per_two_ms_of_work(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    clock = _FakeTime()
    monkeypatch.setattr(_pace, "time", clock)
    redactor = Redactor().for_session(SecretMemory())
    messages = [Message.tool(f"c{i}", f"{i}: paced-{nonce} " + "x = load(path)\n" * 1_200) for i in range(30)]
    inner = type(redactor._message_redactor).redact_messages

    def costly(self: object, items: list[Message], **kwargs: object) -> object:
        clock.spend(WORK_PER_MESSAGE_S)
        return inner(self, items, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(type(redactor._message_redactor), "redact_messages", costly)
    assert redactor.redact_ahead(messages) == 30
    assert clock.pauses <= 30 * WORK_PER_MESSAGE_S / SLICE_S + 1
