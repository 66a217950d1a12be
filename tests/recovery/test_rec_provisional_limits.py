"""Invariants of provisional (inferred) limits beside lasting (stated) ones, in memory and in a real store (s19h).

A provisional limit is the session's own, for PROVISIONAL_LIMIT_SECONDS: no other session ever reads it, the
session's next manager reads it while it holds, and once every provisional lesson has expired the limit is the
lowest lasting one again (None when there was none).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.manager._limits import PROVISIONAL_LIMIT_SECONDS, ProviderLimit
from contextfold.stores import MemoryBlobStore

MODEL = "gpt-4o"

# (tokens, provisional, seconds passed before it)
_LESSON = st.tuples(st.integers(1, 50_000), st.booleans(), st.integers(0, PROVISIONAL_LIMIT_SECONDS))


class _Clock:
    def __init__(self) -> None:
        self.at = 1_800_000_000.0

    def __call__(self) -> float:
        return self.at


def _limit(store: MemoryBlobStore, tag: str, clock: _Clock) -> ProviderLimit:
    def warn(message: str) -> None:
        raise AssertionError(message)

    return ProviderLimit(MODEL, store, warn, session_tag=tag, now=clock)


@settings(max_examples=150, deadline=None)
@given(st.lists(_LESSON, min_size=1, max_size=12))
def test_provisional_limits_stay_with_the_session_and_expire(lessons: list[tuple[int, bool, int]]) -> None:
    store, clock = MemoryBlobStore(), _Clock()
    limit = _limit(store, "a", clock)
    lasting: int | None = None
    for tokens, provisional, passed in lessons:
        clock.at += passed
        if provisional:
            limit.learn(tokens, shared=0, provisional=True)
        else:
            limit.learn(tokens)
            lasting = tokens if lasting is None else min(lasting, tokens)
        assert limit.tokens is not None and limit.tokens >= 1
        assert lasting is None or limit.tokens <= lasting
        # Another session reads the lasting limits only; the session's next manager reads what holds now.
        assert _limit(store, "b", clock).load() == lasting
        assert _limit(store, "a", clock).load() == limit.tokens
    clock.at += PROVISIONAL_LIMIT_SECONDS + 1
    limit.expire()
    assert limit.tokens == lasting
    assert _limit(store, "a", clock).load() == lasting
