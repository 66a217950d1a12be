"""FleetWorker in one process: turns, idempotent retries, background compaction that loses to a turn, restore."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.fleet import TURN_MARK, FleetWorker
from contextfold.formats import get_format
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.stores.memory import MemoryBlobStore
from contextfold.stores.session import MemorySessionStore, SessionState
from contextfold.testing.fleet import FleetConfig, _strip, recorded_turns

TAU = Path(__file__).resolve().parents[3] / "shared" / "data" / "trajectories" / "taubench-airline"
WINDOW = 6_000  # small enough that tau-bench sessions get compacted within a few turns


class HookedSessionStore(MemorySessionStore):
    """The memory store, running ``on_load`` once right after the next load (to land a save in between)."""

    def __init__(self) -> None:
        super().__init__()
        self.on_load: Callable[[], None] | None = None

    def load_state(self, session_id: str) -> SessionState:
        state = super().load_state(session_id)
        hook, self.on_load = self.on_load, None
        if hook is not None:
            hook()
        return state


def _worker(sessions: MemorySessionStore | None = None) -> FleetWorker:
    archive = Archive(MemoryArchiveStore(), redactor=Redactor(enabled=False))
    return FleetWorker(sessions if sessions is not None else MemorySessionStore(), blobs=MemoryBlobStore(),
                       archive=archive, max_context_tokens=WINDOW, redact=False)


@pytest.fixture(scope="module")
def turns() -> dict[str, list[tuple[list[Message], list[Message]]]]:
    if not TAU.exists():
        pytest.skip(f"shared data not found at {TAU}")
    return recorded_turns(FleetConfig(sessions=5, data=str(TAU)))


def _original(turns: Sequence[tuple[Sequence[Message], Sequence[Message]]]) -> list[Message]:
    return [_strip(m) for inputs, reply in turns for m in (*inputs, *reply)]


def test_turns_with_random_background_compactions_restore_every_session_exactly(
        turns: Mapping[str, list[tuple[list[Message], list[Message]]]]) -> None:
    worker = _worker()
    rng = random.Random(7)
    validate = get_format("openai_chat").validate
    applied = 0
    for session_id, session in turns.items():
        for number, (inputs, reply) in enumerate(session, start=1):
            result = worker.turn(session_id, number, inputs, reply)
            assert not result.duplicate and result.attempts == 1
            validate(result.view)
            # The view sent holds this turn's inputs as they were added (tool outputs may be truncated views).
            sent_ids = [m.meta.get("id") for m in worker.sessions.load_state(session_id).messages]
            assert all(m.meta["id"] in sent_ids for m in inputs)
            if result.soft_due or rng.random() < 0.3:
                applied += worker.compact(session_id).applied
        worker.finish(session_id)
        assert worker.restore(session_id, keep_meta=None) == _original(session)
    assert applied > 0, "the window is small enough that some background compaction must apply"


def test_a_retried_turn_is_not_applied_twice(turns: Mapping[str, list[tuple[list[Message], list[Message]]]]) -> None:
    worker = _worker()
    session_id, session = next(iter(turns.items()))
    first = worker.turn(session_id, 1, *session[0])
    again = worker.turn(session_id, 1, *session[0])  # the worker that ran it died before answering
    assert again.duplicate and again.view is None and again.version == first.version
    state = worker.sessions.load_state(session_id)
    assert state.marks == {TURN_MARK: "1"}
    assert [m.meta["id"] for m in state.messages] == [m.meta["id"] for m in (*session[0][0], *session[0][1])]
    with pytest.raises(ValueError, match="is at turn 1, got turn 3"):
        worker.turn(session_id, 3, *session[2])


def test_a_background_compaction_loses_to_a_turn_that_landed_meanwhile(
        turns: Mapping[str, list[tuple[list[Message], list[Message]]]]) -> None:
    store = HookedSessionStore()
    compactor, other = _worker(store), _worker(store)
    other.archive = compactor.archive
    other.blobs = compactor.blobs
    session_id, session = max(turns.items(), key=lambda kv: sum(len(i) + len(r) for i, r in kv[1]))
    last = len(session) - 1
    for number, (inputs, reply) in enumerate(session[:last], start=1):
        compactor.turn(session_id, number, inputs, reply)
    before = store.load_state(session_id)

    def land_the_last_turn() -> None:
        other.turn(session_id, last + 1, *session[last])

    store.on_load = land_the_last_turn  # between the compactor's load and its save
    outcome = compactor.compact(session_id)
    after = store.load_state(session_id)
    assert not outcome.applied
    assert after.version == before.version + 1  # only the turn's save: no lost update, no compaction on top
    assert after.marks[TURN_MARK] == str(last + 1)
    assert [m.meta.get("id") for m in after.messages[-len(session[last][0]) - len(session[last][1]):]] == [
        m.meta["id"] for m in (*session[last][0], *session[last][1])]
    assert outcome.discarded and outcome.tokens_after < outcome.tokens_before  # computed, then dropped
    compactor.finish(session_id)
    assert compactor.restore(session_id, keep_meta=None) == _original(session)
