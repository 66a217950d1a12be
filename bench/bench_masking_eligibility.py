"""How masking's eligibility scales on the agent's thread in the lm32b loop: what each call reads and costs.

Issue 22 asks per-turn work proportional to what is new, not to the history. Masking's eligibility
(``cache/masking._eligible``) reads every tool result of the view on each masking batch. This replays the loop as
``bench_agent_loop.py`` does and, for each call on the agent's thread, records the view's length, its tool results,
the eligible ones and the call's thread CPU (one timer, ~1-2 us), then prints their spread and the CPU by thirds of
the calls sorted by tool results: the slope between them is what a memo kept per result could save at most.

Run: PYTHONPATH=src python bench/bench_masking_eligibility.py [--sessions 69] [--window 16000] [--digest light|full]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

from _timing import DATA, replay_loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=69, help="the first N lm32b sessions by id")
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--digest", choices=("full", "light"), default=None, help="policy.mask_digest")
    args = parser.parse_args()

    from contextfold.cache import masking

    agent = threading.current_thread()
    calls: list[tuple[int, int, int, float]] = []  # (view length, tool results, eligible, CPU seconds)
    inner = masking._eligible

    def eligible(view: Any, *a: Any, **k: Any) -> list[int]:
        if threading.current_thread() is not agent:
            return inner(view, *a, **k)
        started = time.thread_time()
        out = inner(view, *a, **k)
        spent = time.thread_time() - started
        calls.append((len(view), sum(1 for m in view if m.role == "tool"), len(out), spent))
        return out

    masking._eligible = eligible  # (looked up by mask_tool_outputs at each call)
    policy = {"mask_digest": args.digest} if args.digest else None
    replay_loop(DATA, args.sessions, session_prefix="bench-eligibility", policy=policy, window=args.window)
    if not calls:
        print("no masking batch on the agent's thread")
        return

    def spread(values: list[float]) -> str:
        ranked = sorted(values)
        at = [ranked[min(len(ranked) - 1, int(q * len(ranked)))] for q in (0.5, 0.9, 0.98)]
        return " / ".join(f"{v:g}" for v in at) + f" / {ranked[-1]:g}"

    print(f"{len(calls)} eligibility calls on the agent's thread; p50 / p90 / p98 / max:")
    print(f"  view messages   {spread([float(c[0]) for c in calls])}")
    print(f"  tool results    {spread([float(c[1]) for c in calls])}")
    print(f"  eligible        {spread([float(c[2]) for c in calls])}")
    print(f"  CPU us          {spread([round(c[3] * 1e6, 1) for c in calls])}")
    print(f"  CPU us / result {spread([round(c[3] * 1e6 / max(1, c[1]), 2) for c in calls])}")
    ranked = sorted(calls, key=lambda c: c[1])
    third = len(ranked) // 3 or 1
    for part in (ranked[:third], ranked[third : 2 * third], ranked[2 * third :]):
        if part:
            print(f"  {part[0][1]:>3}-{part[-1][1]:<3} results: median CPU "
                  f"{statistics.median(c[3] for c in part) * 1e6:.1f} us over {len(part)} calls")


if __name__ == "__main__":
    main()
