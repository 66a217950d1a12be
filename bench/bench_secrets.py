"""Secrets through a whole session, by where they are planted: how many of the corpus's forms leak, and where to.

Run: ``python bench/bench_secrets.py [--summarizer extractive|llm]`` (needs the otel extra, node/npx for the real
Ariadne server, as ``tests/e2e/test_e2e_secrets.py`` does; that test's session, egress receivers and leak check are
used as they are). Each row plants every form of ``tests/redact_corpus.py`` in one position only (user text,
assistant text, tool-call arguments, a small tool output, a large one cut at write time), nothing repeated; the last
row is the test's own session: positions in turn, each value repeated bare a turn or two later elsewhere. A form
leaks into an egress when one of its values, or a fragment of one (10 letters and digits, 16 for hex), is in it.

To compare with another tree, run the same file with that tree's sources first on the path, e.g.
``PYTHONPATH=/tmp/base/src python bench/bench_secrets.py`` (the tests' helpers come from this tree).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))

import test_e2e_secrets as e2e

import contextfold

# Egresses grouped as the report prints them.
GROUPS = {
    "archive": lambda name: name.startswith("archive/") and "/summary-" not in name and "events" not in name,
    "summaries": lambda name: "/summary-" in name,
    "events+exporters": lambda name: "events" in name or name.split(" ")[0] in {
        "jsonl", "ariadne", "otlp", "live", "console"},
    "cli+report": lambda name: name.startswith("cli") or name == "html report",
    "llm requests": lambda name: name == "llm summarizer requests",
}


def plan_at(position: str) -> list[e2e.Planted]:
    return [e2e.Planted(s, position, i % (e2e.TURNS - 3), "", 0) for i, s in enumerate(e2e.SECRETS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summarizer", default="extractive", choices=["extractive", "llm"])
    args = parser.parse_args()
    print(f"contextfold from {Path(contextfold.__file__).parent}; {len(e2e.SECRETS)} forms; summarizer "
          f"{args.summarizer}; window {e2e.WINDOW:,}, {e2e.TURNS} turns")
    rows = [(p, plan_at(p)) for p in e2e.POSITIONS] + [("mixed + bare repeats", e2e._plan())]
    print(f"{'planted in':<22}{'any':>5}" + "".join(f"{g:>18}" for g in GROUPS) + f"{'cpu s':>8}")
    server = e2e.start_ariadne()
    try:
        for name, plan in rows:
            session = e2e.build_session(plan)
            started = time.process_time()
            with tempfile.TemporaryDirectory() as root:
                outputs, (cut, masked, compacted) = e2e.run(args.summarizer, Path(root), server, session)
                if args.summarizer == "extractive":
                    outputs.update(e2e._replay(Path(root), session))
            cpu = time.process_time() - started
            found = e2e.leaks(outputs, session)
            by_group = {g: len({form for where, form, _ in found if test(where)}) for g, test in GROUPS.items()}
            print(f"{name:<22}{len({form for _, form, _ in found}):>5}"
                  + "".join(f"{by_group[g]:>18}" for g in GROUPS)
                  + f"{cpu:>8.1f}   ({cut} cut, {masked} maskings, {compacted} compactions)", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
