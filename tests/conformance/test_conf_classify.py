"""Classification drives compaction (003 §4): FACT is compressed first, REASONING and INSTRUCTION kept longer."""

from __future__ import annotations

from collections import Counter

from conftest import TRAJECTORIES, require

from contextfold.compaction import Category, Policy, classify, compact
from contextfold.importers._files import load_sessions
from contextfold.pairing import normalize
from contextfold.summarize.extractive import ExtractiveSummarizer
from contextfold.tokens import counter_for_model


def test_recorded_sessions_keep_reasoning_and_instructions_longer_than_facts() -> None:
    require(TRAJECTORIES.is_dir(), f"shared data not found at {TRAJECTORIES}")
    counter = counter_for_model("gpt-4o")
    sessions = [s for path in sorted((TRAJECTORIES / "sweagent-claude4sonnet").glob("*.traj"))
                for s in load_sessions(path)]
    sessions += load_sessions(TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json")[:12]
    before: Counter[Category] = Counter()
    kept: Counter[Category] = Counter()
    for session in sessions:
        view = normalize(list(session.messages))
        total = counter.count_messages(view)
        pinned = sum(counter.count_message(m) for m in view if m.role in ("system", "developer"))
        result = compact(view, policy=Policy(), counter=counter, summarizer=ExtractiveSummarizer(),
                         budget=pinned + (total - pinned) // 2, kind="hard")
        survivors = {id(m) for m in result.messages}
        for m in view:
            tokens = counter.count_message(m)
            before[classify(m)] += tokens
            kept[classify(m)] += tokens if id(m) in survivors else 0
    share = {c: kept[c] / before[c] for c in before}
    assert set(share) == set(Category)
    # A call (MIXED) and its result (FACT) leave together, so they are reduced as one; plain reasoning and the
    # instructions outlive both.
    assert max(share[Category.FACT], share[Category.MIXED]) < share[Category.REASONING] < share[Category.INSTRUCTION]
