"""A paused session's turn: how often the policy decides again, and what a no-op turn costs, against a base tree.

While the circuit breaker holds automatic compaction paused, the policy in force is the manager's with ``auto`` off.
It was a new copy on every call, and the plan kept per figures (``manager/_decisions.py``) compares the policy by
identity: a paused session decided again every time, a tool result's check in ``add()`` and the ``prepare()`` after
it on the same figures included. Measured here on ``bench_prepare.py``'s session (user / assistant calling a tool /
tool result, a window nothing fills), paused at the start: each step adds one message and calls
``prepare(format="openai_chat")``. Counted: the calls to ``compaction.decide`` and the decisions asked for
(``Decisions.decide``): asked - made = the plans handed out again. Timed: this thread's CPU of the ``add()`` +
``prepare()`` step and of the ``prepare()`` alone (median and p99 of all runs' steps pooled).

Each (tree, size) runs in a fresh interpreter, trees alternating run by run. Nothing here asserts on time.

Run: python bench/bench_paused_prepare.py --base /tmp/base/src [--runs 5] [--sizes 100 10000] [--calls 1500]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _bytecode import compiled
from bench_prepare import BIG_WINDOW, NO_MESSAGE_CAP, NO_TOOL_BUDGET, message, percentile

HERE = Path(__file__).resolve().parent
# Longer than any run: the circuit breaker stays open (paused) for the whole measurement.
COOLDOWN_S = 1e9


def child(size: int, calls: int, seed: int) -> None:
    import contextfold
    import contextfold.compaction as compaction
    from contextfold.compaction import Action
    from contextfold.manager import ContextManager, _decisions

    made = [0]
    asked = [0]
    decide, keep = compaction.decide, _decisions.Decisions.decide

    def counted_decide(*args: Any, **kwargs: Any) -> Any:
        made[0] += 1
        return decide(*args, **kwargs)

    def counted_keep(self: Any, *args: Any, **kwargs: Any) -> Any:
        asked[0] += 1
        return keep(self, *args, **kwargs)

    compaction.decide = counted_decide  # (read by Decisions through a lazy module: set before its first read)
    _decisions.Decisions.decide = counted_keep  # type: ignore[method-assign]
    rng = random.Random(seed)
    # bench_prepare's manager, its circuit breaker's cool-down longer than the run
    policy = compaction.Policy(emergency_message_count=NO_MESSAGE_CAP, tool_output_budget_tokens=NO_TOOL_BUDGET,
                               circuit_cooldown_s=COOLDOWN_S)
    cm = ContextManager(model="gpt-4o", max_context_tokens=BIG_WINDOW, policy=policy, store="memory",
                        archive="memory", session_id="bench")
    cm.add([message(i, rng) for i in range(size)])
    cm.prepare(format="openai_chat")
    cm.tokens()  # (the exact tokenizer loaded: its thread must not run while we measure)
    cm.paused = True
    assert cm.paused
    steps: list[float] = []
    prepares: list[float] = []
    made[0] = asked[0] = 0
    for i in range(size, size + calls):
        c0 = time.thread_time()
        cm.add(message(i, rng))
        c1 = time.thread_time()
        cm.prepare(format="openai_chat")
        c2 = time.thread_time()
        if cm.last_plan is None or cm.last_plan.action is not Action.NONE:
            raise SystemExit(f"the bench's premise broke: the policy planned {cm.last_plan}")
        steps.append((c2 - c0) * 1000)
        prepares.append((c2 - c1) * 1000)
    cm.close()
    print(json.dumps({"source": str(Path(contextfold.__file__).parent), "steps": steps, "prepares": prepares,
                      "made": made[0], "asked": asked[0]}))


def run_child(src: str, size: int, calls: int, seed: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": compiled(src)}
    args = [sys.executable, __file__, "--child", str(size), "--calls", str(calls), "--seed", str(seed)]
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=HERE)
    if done.returncode != 0:
        raise SystemExit(f"{src} at {size} messages failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["source"]).resolve() != (Path(src) / "contextfold").resolve():
        raise SystemExit(f"the child imported {result['source']}, not the tree under {src}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1_500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base", default=None, help="another src directory, measured in the same run")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.calls, args.seed)
        return
    trees = [("this tree", str(HERE.parent / "src"))] + ([("base", args.base)] if args.base else [])
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; {args.runs} runs per tree and "
          f"size, {args.calls} steps per run, trees alternating; paused (circuit breaker open) throughout")
    pooled: dict[tuple[int, str], dict[str, Any]] = {}
    for run in range(args.runs):
        for size in args.sizes:
            for label, src in trees if run % 2 == 0 else trees[::-1]:
                result = run_child(src, size, args.calls, args.seed + run)
                into = pooled.setdefault((size, label), {"steps": [], "prepares": [], "made": 0, "asked": 0})
                for key in ("steps", "prepares"):
                    into[key].extend(result[key])
                into["made"] += result["made"]
                into["asked"] += result["asked"]
    header = (f"{'messages':>9} | {'tree':<9} | {'decisions asked':>15} | {'made':>6} | {'plans reused':>12} | "
              f"{'add+prepare CPU med / p99 ms':>28} | {'prepare CPU med / p99 ms':>24}")
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        for label, _ in trees:
            p = pooled[(size, label)]
            step, prep = p["steps"], p["prepares"]
            print(f"{size:>9} | {label:<9} | {p['asked']:>15,} | {p['made']:>6,} | {p['asked'] - p['made']:>12,} | "
                  f"{statistics.median(step):>13.3f} / {percentile(step, 0.99):>8.3f}   | "
                  f"{statistics.median(prep):>10.3f} / {percentile(prep, 0.99):>8.3f}")
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
