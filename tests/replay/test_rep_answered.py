"""Property: in every view of every replayed session, the answered message is there with real content.

The answered message is the latest user message, or the latest assistant tool calls with all their results (see
contextfold.answered). Replaying all 272 shared sessions at three windows takes minutes, so hypothesis samples
(session, window) pairs with a fixed seed; ``bench/bench_quality.py --answered`` runs the exhaustive check.
"""

from __future__ import annotations

from functools import cache

from conftest import TRAJECTORIES, require
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.importers._files import load_sessions
from contextfold.importers._session import RecordedSession
from contextfold.replay.harness import ReplayOptions, SessionReplayer
from contextfold.replay.metrics import TurnMetrics

WINDOWS = (4_000, 8_000, 16_000)
SOURCES = ("sweagent-lm32b", "sweagent-claude4sonnet", "taubench-airline")


@cache
def sessions(source: str) -> tuple[RecordedSession, ...]:
    return tuple(load_sessions(TRAJECTORIES / source))


@settings(max_examples=12, deadline=None, derandomize=True)
@given(source=st.sampled_from(SOURCES), pick=st.integers(0, 10_000), window=st.sampled_from(WINDOWS))
def test_the_answered_message_is_in_every_view(source: str, pick: int, window: int) -> None:
    require(TRAJECTORIES.is_dir(), "shared trajectories not found")
    # The claude sessions are ten times longer than the others: replay them at 16K only, where they fit in time.
    if source == "sweagent-claude4sonnet":
        window = 16_000
    # At 4K a SWE-agent system prompt plus one answered call (a 1,200-token edit and its output) can exceed the
    # 2,500-token hard threshold; the view must fit, so the answered message then goes (0.7% of lm32b turns at 4K,
    # measured by bench/bench_quality.py --answered). 4K is tau-bench's window.
    if source.startswith("sweagent") and window == 4_000:
        window = 8_000
    pool = sessions(source)
    session = pool[pick % len(pool)]
    replayer = SessionReplayer(session, ReplayOptions(window=window))
    failures: list[int] = []

    def check(metrics: TurnMetrics) -> None:
        # The harness checks the view it built for this turn with contextfold.answered.answered_in_view.
        assert metrics.valid, metrics.error
        assert metrics.answered_in_view is not None or metrics.turn <= 2
        if metrics.answered_in_view is False:
            failures.append(metrics.turn)

    try:
        replayer.run(on_turn=check)
    finally:
        replayer.manager.close()
    assert failures == [], f"{session.id} @ {window}: answered message hidden before turns {failures}"
