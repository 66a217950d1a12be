"""One ``MessageCounter`` counted from two threads: the agent's and the telemetry thread's (issue 22's first figures).

The telemetry thread counts a first call's exact figures with the manager's own counter, making it exact there while
the agent thread may be counting with byte bounds. Every interleaving here is forced with hooks and events, never by
waiting: a wait with a timeout only ends a test that would otherwise hang on a broken counter.
"""

from __future__ import annotations

import threading

import pytest

from contextfold.messages import Message, _set_role
from contextfold.tokens.counting import MessageCounter

_PATIENCE_S = 10.0  # (only a broken counter waits this long)


class _Loader:
    """A text counter that loads slowly (``ready``, ``preload``, ``wait_ready``): one token a word once loaded.

    ``hold_first_look(thread)`` stops that thread at its first look at ``ready`` until ``go`` is set.
    """

    def __init__(self) -> None:
        self.loaded = False
        self.at_ready = threading.Event()
        self.go = threading.Event()
        self._held: threading.Thread | None = None

    def hold_first_look(self, thread: threading.Thread) -> None:
        self._held = thread

    @property
    def ready(self) -> bool:
        if self._held is threading.current_thread():
            self._held = None
            self.at_ready.set()
            assert self.go.wait(_PATIENCE_S)
        return self.loaded

    def preload(self) -> None:
        pass

    def wait_ready(self) -> None:
        self.loaded = True

    def count(self, text: str) -> int:
        assert self.loaded, "an exact count was asked for before the tokenizer was loaded"
        return len(text.split())


def _exact(message: Message) -> int:
    loader = _Loader()
    loader.loaded = True
    return MessageCounter(loader).count_message(message)


class _RoleMadeExactWhenRead(str):
    """A role whose bytes are read just as another thread makes the counter exact (``ExactFigures._exact_counter``)."""

    counter: MessageCounter

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        other = threading.Thread(target=self.counter.wait_exact)
        other.start()
        other.join()
        return str.encode(self, encoding, errors)


def test_a_role_counted_in_bytes_as_the_counter_turns_exact_is_not_kept() -> None:
    counter = MessageCounter(_Loader(), lazy=True)
    role = _RoleMadeExactWhenRead("user")
    role.counter = counter
    hooked = Message.user("one two three")
    _set_role(hooked, role)  # type: ignore[arg-type]
    assert counter.provisional
    counter.count_message(hooked)  # (a byte bound: the counter was provisional when it started)
    assert not counter.provisional
    # Every later count of a user message is exact: the role's byte count was not cached after the clearing.
    assert counter.count_message(Message.user("four five six")) == _exact(Message.user("four five six"))
    assert counter._roles == {"user": 1}


def test_two_threads_seeing_the_tokenizer_arrive_forget_the_counts_once() -> None:
    loader = _Loader()
    counter = MessageCounter(loader, lazy=True)
    loader.loaded = True  # (arrived: the next look at ``ready`` on any thread makes the counter exact)
    first, second = Message.user("first message"), Message.user("second message here")
    counted: list[int] = []
    agent = threading.Thread(target=lambda: counted.append(counter.count_message(first)))
    loader.hold_first_look(agent)
    agent.start()
    try:
        assert loader.at_ready.wait(_PATIENCE_S)  # the agent saw the tokenizer ready, and has not cleared yet
        assert counter.count_message(second) == _exact(second)  # this thread turns the counter exact, and caches
    finally:
        loader.go.set()
        agent.join(_PATIENCE_S)
    assert counted == [_exact(first)]
    # One change, one clearing: the agent did not clear again, dropping the count made in between.
    assert counter.revision == 1
    assert counter.cache_info()[0] == 2


class _PausingLock:
    """A counter's lock that stops one thread before its ``nth`` taking of it until ``release`` is set."""

    def __init__(self, nth: int) -> None:
        self.thread: threading.Thread | None = None
        self.paused, self.release = threading.Event(), threading.Event()
        self._nth = nth
        self._taken = 0
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        if threading.current_thread() is self.thread:
            self._taken += 1
            if self._taken == self._nth:
                self.paused.set()
                assert self.release.wait(_PATIENCE_S)
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _pause_pass(counter: MessageCounter, thread: threading.Thread, *, before_taking: int) -> _PausingLock:
    """Stop ``thread``'s count_each pass before it takes the counter's lock the ``before_taking``-th time."""
    lock = _PausingLock(before_taking)
    lock.thread = thread
    counter._lock = lock  # type: ignore[assignment]
    return lock


def _history(n: int) -> list[Message]:
    return [Message.user(f"note {i} of the history") for i in range(n)]


def test_the_agent_counts_while_another_thread_passes_over_a_long_view() -> None:
    loader = _Loader()
    loader.loaded = True
    counter = MessageCounter(loader)
    view = _history(2000)
    counter.count_each(view)  # (cached, as the manager's view is when the telemetry thread counts its figures)
    passes: list[list[int]] = []
    telemetry = threading.Thread(target=lambda: passes.append(counter.count_each(view)))
    pause = _pause_pass(counter, telemetry, before_taking=3)  # (mid-pass: 2000 messages are more than two chunks)
    telemetry.start()
    try:
        assert pause.paused.wait(_PATIENCE_S)
        agent_counted = threading.Event()
        probe = Message.user("a new message from the agent")
        agent = threading.Thread(target=lambda: (counter.count_message(probe), agent_counted.set()))
        agent.start()
        # The agent's count does not wait for the pass to end (it waited on the pass's one hold of the lock).
        assert agent_counted.wait(_PATIENCE_S)
        agent.join(_PATIENCE_S)
    finally:
        pause.release.set()
        telemetry.join(_PATIENCE_S)
    assert passes == [[_exact(m) for m in view]]


@pytest.mark.parametrize("recounted", [True, False], ids=["view-recounted-meanwhile", "cache-left-empty"])
def test_a_pass_meeting_the_exact_counts_midway_counts_none_in_bytes(recounted: bool) -> None:
    """Met between two chunks (the rest found exact in the cache), or while counting what it did not find."""
    counter = MessageCounter(_Loader(), lazy=True)
    view = _history(2000)
    exact = [_exact(m) for m in view]
    assert all(b > n for b, n in zip(counter.count_each(view), exact, strict=True))  # (cached byte bounds)
    passes: list[list[int]] = []
    agent = threading.Thread(target=lambda: passes.append(counter.count_each(view)))
    pause = _pause_pass(counter, agent, before_taking=2)
    agent.start()
    try:
        assert pause.paused.wait(_PATIENCE_S)  # the first chunk was read from the cache: byte bounds
        counter.wait_exact()  # (the telemetry thread, building a first call's figures, ...
        if recounted:
            assert counter.count_each(view) == exact  # ... which it counts exactly, and caches)
    finally:
        pause.release.set()
        agent.join(_PATIENCE_S)
    assert passes == [exact]  # counted again, all exact: no mix of bounds and exact counts


def test_a_pass_meeting_the_exact_counts_as_it_counts_what_it_missed_counts_none_in_bytes() -> None:
    counter = MessageCounter(_Loader(), lazy=True)
    view = _history(2000)  # (none cached: the pass counts each one after reading the cache in four chunks)
    passes: list[list[int]] = []
    agent = threading.Thread(target=lambda: passes.append(counter.count_each(view)))
    pause = _pause_pass(counter, agent, before_taking=4 + 20)  # (some messages counted in bytes already)
    agent.start()
    try:
        assert pause.paused.wait(_PATIENCE_S)
        counter.wait_exact()  # (the telemetry thread, building a first call's figures)
    finally:
        pause.release.set()
        agent.join(_PATIENCE_S)
    assert passes == [[_exact(m) for m in view]]
