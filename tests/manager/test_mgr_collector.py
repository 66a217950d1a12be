"""The cyclic collector is paused while a long history is compacted, and always resumed (issue 22).

A compaction keeps what it builds until it returns, so collections during it free nothing of it; at 100,000
messages they were a sixth of the first ``prepare()``. The pause is shared by compactions on several threads, never
outlives the last of them, leaves a collector the application turned off turned off, and short views are not paused.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest

from contextfold.manager import ContextManager, _collector
from contextfold.manager._collector import collector_paused
from contextfold.messages import Message, ToolCall
from contextfold.summarize.base import SummaryRequest, SummaryResult
from contextfold.telemetry import Event, RecordingTelemetry


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    if was:
        gc.enable()


def _collecting() -> bool:
    """Whether the collector runs by itself (a pause stops it without turning it off: that is the application's)."""
    return gc.isenabled() and gc.get_threshold()[0] != 0


def test_a_long_view_pauses_the_collector_and_resumes_it_after_even_on_error() -> None:
    assert _collecting()
    with collector_paused(_collector.PAUSE_MIN_MESSAGES):
        assert not _collecting()
    assert _collecting()
    with pytest.raises(ValueError), collector_paused(10**6):
        assert not _collecting()
        raise ValueError("compaction failed")
    assert _collecting()
    with collector_paused(_collector.PAUSE_MIN_MESSAGES - 1):  # (short: not paused)
        assert _collecting()


def test_a_collector_the_application_turned_off_stays_off() -> None:
    gc.disable()
    with collector_paused(10**6):
        assert not _collecting()
    assert not gc.isenabled()


def test_compactions_on_two_threads_share_one_pause_resumed_by_the_last() -> None:
    entered, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other() -> None:
        with collector_paused(10**6):
            entered.set()
            release.wait()
            seen.append(_collecting())

    thread = threading.Thread(target=other)
    with collector_paused(10**6):
        thread.start()
        entered.wait()
    assert not _collecting()  # (the other compaction still runs)
    release.set()
    thread.join()
    assert seen == [False] and _collecting()


class _Recording:
    """An extractive-like summarizer that notes whether the collector ran while it was called."""

    def __init__(self, fail: bool = False) -> None:
        self.enabled: list[bool] = []
        self.fail = fail

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.enabled.append(_collecting())
        if self.fail:
            raise RuntimeError("provider down")
        return SummaryResult(summary=f"{len(request.messages)} messages", summarizer="recording")


def _history() -> list[Message]:
    out = [Message.system("you help")]
    for i in range(12):
        out += [Message.user(f"collector-5e1a step {i} " * 20), Message.assistant(f"done {i} " * 20)]
    return out


@pytest.mark.parametrize("fail", [False, True])
def test_a_manager_compacts_a_long_view_with_the_collector_paused_but_not_while_a_summarizer_waits(
        monkeypatch: pytest.MonkeyPatch, fail: bool) -> None:
    """The compaction's own work runs paused; a summarizer that may wait on the network (an LLM) runs with the
    collector on (the pause is process-wide: other threads would make garbage with nothing collecting it)."""
    monkeypatch.setattr(_collector, "PAUSE_MIN_MESSAGES", 20)  # (a long view, made short for the test)
    summarizer = _Recording(fail)
    telemetry = _CollectorNoting()
    cm = ContextManager("gpt-4o", store="memory", archive="memory", summarizer=summarizer, telemetry=telemetry,
                        policy={"keep_recent_turns": 1})
    try:
        cm.add(_history())
        if fail:
            with pytest.raises(Exception, match="provider down"):
                cm.compact()
        else:
            assert cm.compact().compacted > 0
            assert ("compact.pruned_messages", False) in telemetry.running  # (applied inside the pause)
        assert summarizer.enabled == [True] and _collecting()
        monkeypatch.setattr(_collector, "PAUSE_MIN_MESSAGES", 10_000)
        cm.add([Message.user("collector-5e1a one more " * 20)])
        summarizer.fail = False
        cm.compact()
        assert summarizer.enabled == [True, True] and _collecting()  # (a short view: not paused)
    finally:
        cm.close()


def test_the_built_in_extractive_summarizer_runs_inside_the_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """All CPU: collections during it would free nothing of what the compaction builds."""
    from contextfold.summarize.extractive import ExtractiveSummarizer

    seen: list[bool] = []

    class Noting(ExtractiveSummarizer):
        def summarize(self, request: SummaryRequest) -> SummaryResult:
            seen.append(_collecting())
            return super().summarize(request)

    monkeypatch.setattr(_collector, "PAUSE_MIN_MESSAGES", 20)
    cm = ContextManager("gpt-4o", store="memory", archive="memory", summarizer=Noting(),
                        policy={"keep_recent_turns": 1})
    try:
        cm.add(_history())
        assert cm.compact().compacted > 0
        assert seen == [False] and _collecting()
    finally:
        cm.close()


def test_released_inside_a_pause_lets_the_collector_run_unless_another_thread_pauses_it() -> None:
    with collector_paused(10**6):
        with _collector.collector_released():
            assert _collecting()
        assert not _collecting()
    assert _collecting()
    with _collector.collector_released():  # (outside a pause: nothing to lift)
        assert _collecting()
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused(10**6):
            entered.set()
            release.wait()

    thread = threading.Thread(target=other)
    thread.start()
    entered.wait()
    with collector_paused(10**6), _collector.collector_released():
        assert not _collecting()  # (the other thread's compaction still holds it)
    release.set()
    thread.join()
    assert _collecting()


class _CollectorNoting(RecordingTelemetry):
    """Notes, for each event, whether the collector was running when it was emitted."""

    def __init__(self) -> None:
        super().__init__()
        self.running: list[tuple[str, bool]] = []

    def emit(self, event: Event) -> None:
        self.running.append((event.name, _collecting()))
        super().emit(event)


def test_a_bulk_add_runs_with_the_collector_paused_and_a_short_one_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed history keeps all it adds: 1,066 collections (5 full) in the add() of 100,000 recorded messages."""
    monkeypatch.setattr(_collector, "PAUSE_MIN_MESSAGES", 20)
    telemetry = _CollectorNoting()
    cm = ContextManager("gpt-4o", store="memory", archive="memory", telemetry=telemetry,
                        tool_output={"max_message_tokens": 50})
    try:
        big = "collector-77c2 " + "lines of a long build log\n" * 400

        def turn(i: int) -> list[Message]:
            call = ToolCall(f"call_{i}", "read", "{}")
            return [Message.user(f"collector-77c2 read {i}"), Message.assistant("", tool_calls=(call,)),
                    Message.tool(f"call_{i}", big + str(i), name="read")]

        telemetry.running.clear()
        cm.add([m for i in range(8) for m in turn(i)])  # 24 messages: a bulk add
        cut = [running for name, running in telemetry.running if name == "cache.truncated"]
        assert len(cut) == 8 and not any(cut) and _collecting()
        telemetry.running.clear()
        cm.add(turn(8))  # 3 messages: the collector runs as usual
        cut = [running for name, running in telemetry.running if name == "cache.truncated"]
        assert cut == [True] and _collecting()
    finally:
        cm.close()


class _Node:
    """A cycle's member, watched by a weak reference."""

    def __init__(self) -> None:
        self.me = self


def test_what_a_pause_kept_reaches_the_oldest_generation_without_a_young_collection() -> None:
    # A bulk add keeps what it makes (100,000 messages: ~300,000 tracked objects): the first young collection after
    # the pause walked all of it (~0.1 s), to promote it toward the oldest generation, where it goes now directly.
    with collector_paused(_collector.PAUSE_MIN_MESSAGES):
        kept = [[f"pause-nonce-7f3a {i}"] for i in range(50_000)]
        cycle = _Node()
        gone = weakref.ref(cycle)
        del cycle
    assert gc.get_count()[0] < gc.get_threshold()[0]  # (no young collection is due)
    oldest = set(map(id, gc.get_objects(generation=2)))
    assert id(kept[0]) in oldest and id(kept[-1]) in oldest
    gc.collect()  # (a cycle made during the pause is found by a full collection)
    assert gone() is None


def test_objects_the_application_froze_stay_frozen_after_a_pause() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused(_collector.PAUSE_MIN_MESSAGES):
            kept = [[i] for i in range(1_000)]
        assert gc.get_freeze_count() == frozen and kept
    finally:
        gc.unfreeze()
