"""How classification shapes compaction on the shared sessions: the share of each category kept verbatim.

Every recorded session (SWE-agent, tau-bench) is compacted once (hard) to its pinned messages plus half of the
rest (a third of the whole would leave tau-bench's 6 KB system prompt almost alone in the view). For each category
(003 §4) the figure is the share of its tokens that stay verbatim in the compacted view (the rest is summarized or
archived). 003 asks that FACTs are compressed first and REASONING and INSTRUCTION kept longer: the printed
survival should rise from FACT to INSTRUCTION. Prints figures; asserts nothing.

Run: /work/main/.venv/bin/python bench/bench_classify.py [--tau 50]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAJECTORIES = ROOT.parent / "shared" / "data" / "trajectories"

from contextfold.compaction import (  # noqa: E402
    Category,
    Policy,
    classify,
    compact,
)
from contextfold.errors import ContextfoldError  # noqa: E402
from contextfold.importers._files import load_sessions  # noqa: E402
from contextfold.pairing import normalize  # noqa: E402
from contextfold.summarize.extractive import ExtractiveSummarizer  # noqa: E402
from contextfold.tokens import counter_for_model  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tau", type=int, default=50, help="tau-bench sessions to include")
    args = parser.parse_args()
    counter = counter_for_model("gpt-4o")
    sessions = []
    for folder in ("sweagent-lm32b", "sweagent-claude4sonnet"):
        for path in sorted((TRAJECTORIES / folder).glob("*.traj")):
            sessions.extend(load_sessions(path))
    sessions.extend(load_sessions(TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json")[: args.tau])
    before: Counter[Category] = Counter()
    kept: Counter[Category] = Counter()
    failed = 0
    for session in sessions:
        view = normalize(list(session.messages))
        total = counter.count_messages(view)
        pinned = sum(counter.count_message(m) for m in view if m.role in ("system", "developer"))
        try:
            result = compact(view, policy=Policy(), counter=counter, summarizer=ExtractiveSummarizer(),
                             budget=pinned + (total - pinned) // 2, kind="hard")
        except ContextfoldError:
            failed += 1
            continue
        survivors = {id(m) for m in result.messages}
        for m in view:
            category = classify(m)
            tokens = counter.count_message(m)
            before[category] += tokens
            if id(m) in survivors:
                kept[category] += tokens
    print(f"{len(sessions)} sessions, {failed} could not be compacted to pinned + half of the rest")
    print(f"{'category':<12} {'tokens':>12} {'kept verbatim':>14} {'share kept':>11}")
    for category in (Category.FACT, Category.MIXED, Category.REASONING, Category.INSTRUCTION):
        share = kept[category] / before[category] if before[category] else 0.0
        print(f"{category.value:<12} {before[category]:>12,} {kept[category]:>14,} {share:>10.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
