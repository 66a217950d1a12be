"""Steady-state ``prepare()`` latency with the embedded defaults' telemetry on, this tree against a baseline tree.

The ~21 ms p99 of issue 15 (median 0.2 ms) was not GC: it was the telemetry thread that writes the session's
events into the archive. Every 50 ms it redacted each event (twice: the processor, then the archive) and
serialized the batch, all under the GIL, and CPython hands the GIL to a waiting thread only after its 5 ms switch
interval. A ``prepare()`` landing in such a batch waited for one or more handovers.

Each tree is measured in its own interpreter, the trees alternating size by size so that both see the same load
of the moment. A history of N messages (the bench_prepare.py generator: user / assistant with a tool call / tool
result) with a window so big that nothing is compacted, masked or capped; each step appends one message and
times one ``prepare()`` (wall, and this thread's CPU time, which excludes waiting for the GIL or a core), and the
``add()`` before it (the turn is both).

Run: python bench/bench_p99.py [--baseline /work/main/src] [--sizes 100 1000 10000] [--calls 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = r"""
import gc, json, random, sys, time
sys.path.insert(0, {bench!r})
from bench_prepare import manager, message, percentile
size, calls = {size}, {calls}
rng = random.Random(0)
cm = manager()
cm.add([message(i, rng) for i in range(size)])
cm.prepare()
cm.tokens()  # the exact tokenizer is loaded: the steady state is measured, not the cold start
gc.collect()
wall, cpu, add, turn = [], [], [], []
for i in range(size, size + calls):
    a0 = time.perf_counter()
    cm.add(message(i, rng))
    add.append((time.perf_counter() - a0) * 1000)
    c0, t0 = time.thread_time(), time.perf_counter()
    cm.prepare()
    t1, c1 = time.perf_counter(), time.thread_time()
    wall.append((t1 - t0) * 1000)
    cpu.append((c1 - c0) * 1000)
    turn.append(add[-1] + wall[-1])
cm.close()
print(json.dumps({{"p50": percentile(wall, 0.5), "p99": percentile(wall, 0.99), "p999": percentile(wall, 0.999),
                  "max": max(wall), "cpu_p99": percentile(cpu, 0.99), "over_1ms": sum(w > 1 for w in wall),
                  "add_p50": percentile(add, 0.5), "add_p99": percentile(add, 0.99),
                  "turn_p50": percentile(turn, 0.5), "turn_p99": percentile(turn, 0.99)}}))
"""


def run(src: str, size: int, calls: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src}
    code = _CHILD.format(bench=str(HERE), size=size, calls=calls)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=None, help="another src directory, measured in the same run")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--calls", type=int, default=2_000)
    args = parser.parse_args()
    trees = [("this tree", str(HERE.parent / "src"))] + ([("baseline", args.baseline)] if args.baseline else [])
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'messages':>9} | {'tree':<10} | {'p50 ms':>7} | {'p99 ms':>7} | {'p99.9 ms':>8} | {'max ms':>7} | "
          f"{'cpu p99':>7} | {'calls > 1 ms':>12} | add() p50 / p99 ms | add + prepare p50 / p99 ms")
    for size in args.sizes:
        for label, src in trees:
            f = run(src, size, args.calls)
            print(f"{size:>9} | {label:<10} | {f['p50']:>7.3f} | {f['p99']:>7.3f} | {f['p999']:>8.3f} | "
                  f"{f['max']:>7.1f} | {f['cpu_p99']:>7.3f} | {int(f['over_1ms']):>4} of {args.calls} | "
                  f"{f.get('add_p50', float('nan')):>8.3f} / {f.get('add_p99', float('nan')):.3f} | "
                  f"{f.get('turn_p50', float('nan')):>14.3f} / {f.get('turn_p99', float('nan')):.3f}")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
