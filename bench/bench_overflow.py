"""Overflow recovery in every framework and client wrapper: a provider limit below the window, twelve ordinary tools.

Each case runs the page-reading agent (``contextfold.testing.agent_run``: 12 tools, 30 KB tool outputs, one page
per turn) through the real SDK over loopback HTTP to the scripted server, which accepts 16,000 tokens (counting
tools and instructions) while the manager believes gpt-4o's 128K window (claude-sonnet-4-5's 200K for Anthropic),
and answers an overflow with the provider's real error body. Printed per case: overflow errors, limits learned
from them, compactions, requests, and whether the run finished with the scripted final answer; then the table in
Markdown. The runners are ``tests/integrations/_overflow_runs.py`` (the tests run them for a few turns).

    python bench/bench_overflow.py [--turns 45] [--only langchain] [--json]
    .venv-litellm/bin/python bench/bench_overflow.py --only "litellm client"     # LiteLLM's rows (its own venv)

Figures are counts, not times: they do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integrations"))

from _overflow_runs import CASES, LITELLM_CASES, PROVIDER_LIMIT, Outcome, as_json, run_case, table

DEFAULT_TURNS = 45


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS, help="tool turns per run")
    parser.add_argument("--only", help="run only this framework (e.g. 'langchain', 'openai client')")
    parser.add_argument("--json", action="store_true", help="also print one JSON line per case")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # SDK deprecation notices about the scripted model names
    outcomes: list[Outcome] = []
    print(f"provider limit {PROVIDER_LIMIT:,} tokens; {args.turns} turns per run", flush=True)
    try:
        import litellm  # noqa: F401 - only to know whether its cases can run here
        cases = (*CASES, *LITELLM_CASES)
    except ImportError:  # litellm lives in a venv of its own (openai<3): run this bench there for its rows
        cases = CASES
    for framework, api, stream in cases:
        if args.only and framework != args.only:
            continue
        started = time.process_time()
        outcome = run_case(framework, api, stream, turns=args.turns)
        outcomes.append(outcome)
        print(f"{framework:17} {api:9} {'stream' if stream else 'plain ':6}  overflow errors {outcome.overflows:2}  "
              f"learned {outcome.learned}  compactions {outcome.compactions:3}  requests {outcome.requests:3}  "
              f"completed {'yes' if outcome.completed else 'NO'}  largest request after the first error "
              f"{outcome.largest_after_overflow:,}  ({time.process_time() - started:.1f} s CPU)"
              + (f"  {outcome.error}" if outcome.error else ""), flush=True)
        if args.json:
            print(as_json(outcome), flush=True)
    print()
    print(table(outcomes))
    return 0 if all(o.converged for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
