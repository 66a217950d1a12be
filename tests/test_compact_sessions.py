"""Compaction replayed on real recorded sessions (16K window), with the extractive summarizer and exact counts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contextfold.compaction import CompactionKind, Policy, compact
from contextfold.importers._files import load_sessions
from contextfold.importers._session import RecordedSession
from contextfold.messages import Message
from contextfold.summarize.extractive import ExtractiveSummarizer
from contextfold.tokens import MessageCounter, counter_for_model
from contextfold.truncate import truncate_text

try:  # tests/ as a package (tests/__init__.py) or as a plain folder on sys.path
    from tests.test_compact_support import TRAJECTORIES, assert_valid, clock, require, summaries
except ImportError:
    from test_compact_support import TRAJECTORIES, assert_valid, clock, require, summaries  # type: ignore[no-redef]

WINDOW = 16_000
# Stand-in for the manager's write-time truncation: SWE-agent outputs reach 100K characters, more than the window.
WRITE_TIME_TOKENS = 2_000

SWE_FILES = [
    "sweagent-lm32b/django__django-11239.traj",
    "sweagent-lm32b/astropy__astropy-12907.traj",
    "sweagent-claude4sonnet/sympy__sympy-19954.traj",
]


@dataclass
class Replay:
    compactions: list[str] = field(default_factory=list)
    final: list[Message] = field(default_factory=list)


def _sessions(relative: str) -> list[RecordedSession]:
    require(TRAJECTORIES.is_dir(), f"shared data not found at {TRAJECTORIES}")
    return load_sessions(Path(TRAJECTORIES) / relative)


def _shrink(m: Message, counter: MessageCounter) -> Message:
    if m.role != "tool":
        return m
    cut = truncate_text(m.text, WRITE_TIME_TOKENS, counter=counter.counter)
    return m.with_content(cut.text) if cut.was_truncated else m


def _model_turns(messages: list[Message]) -> Iterator[int]:
    """Indices before which the model was called: every assistant message."""
    for i, m in enumerate(messages):
        if m.role == "assistant":
            yield i


def replay(messages: list[Message], window: int, policy: Policy, *, hard_to_soft: bool = True) -> Replay:
    """Feed the session in; before every model call compact as the manager would (soft over soft, hard over
    hard, down to the soft threshold or, with ``hard_to_soft`` off, to the hard one), and check every view."""
    counter = counter_for_model("gpt-4o")
    budgets = policy.budgets(window)
    summarizer = ExtractiveSummarizer()
    pinned = [m for m in messages if m.role in policy.roles_never_prune]
    view: list[Message] = []
    out = Replay()
    added = 0
    for stop in [*_model_turns(messages), len(messages)]:
        view.extend(_shrink(m, counter) for m in messages[added:stop])
        added = stop
        tokens = counter.count_messages(view)
        if tokens <= budgets.soft:
            continue
        hard_target = budgets.soft if hard_to_soft else budgets.hard
        kind: CompactionKind = "hard" if tokens > budgets.hard else "soft"
        budget = hard_target if kind == "hard" else budgets.hard
        result = compact(view, policy=policy, counter=counter, summarizer=summarizer, budget=budget, kind=kind,
                         compaction_count=len(out.compactions), clock=clock)
        view = result.messages
        assert_valid(view)
        assert all(any(v is p for v in view) for p in pinned)
        if not result.changed:  # nothing outside the keep rules to compact, and the view fits
            assert tokens <= budget
            continue
        out.compactions.append(result.stats.kind)
        assert counter.count_messages(view) <= budget
        assert len(summaries(view)) == 1
    out.final = view
    return out


@pytest.mark.parametrize("relative", SWE_FILES)
def test_swe_agent_sessions_compact_validly_at_16k(relative: str) -> None:
    (session,) = _sessions(relative)
    result = replay(session.messages, WINDOW, Policy())
    assert result.compactions, "a 16K window must force compaction on these sessions"
    (summary,) = summaries(result.final)
    assert summary.meta["summary_version"] == len(result.compactions)
    # the task statement (first user message) is still in the view verbatim
    task = next(m for m in session.messages if m.role == "user")
    assert any(v.text == task.text for v in result.final)


def test_tau_bench_keeps_policy_and_user_messages_at_4k() -> None:
    """Issue 4: at a 4,000-token window the system policy and every user message survive in the view."""
    sessions = _sessions("taubench-airline/gpt-4o-airline.json")
    longest = sorted(sessions, key=lambda s: len(s.messages), reverse=True)[:20]
    compacted = 0
    for session in longest:
        result = replay(session.messages, 4_000, Policy(), hard_to_soft=False)
        compacted += len(result.compactions)
        users = [m for m in session.messages if m.role == "user"]
        final_ids = {id(m) for m in result.final}
        lost = [u.text[:60] for u in users if id(u) not in final_ids]
        assert not lost, f"{session.id}: user messages lost: {lost}"
    assert compacted >= len(longest)


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["sweagent-lm32b", "sweagent-claude4sonnet", "taubench-airline"])
def test_every_session_replays_validly_at_16k(folder: str) -> None:
    """Every shared trajectory, compacted hard down to the soft threshold and to the hard one: valid views, within
    budget, pinned messages intact (checked inside ``replay`` at every compaction)."""
    compactions = 0
    for session in _sessions(folder):
        for hard_to_soft in (True, False):
            result = replay(session.messages, WINDOW, Policy(), hard_to_soft=hard_to_soft)
            compactions += len(result.compactions)
    assert compactions > 0
