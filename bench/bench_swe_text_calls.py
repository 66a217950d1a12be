"""Importing SWE-agent text calls from a hostile ``.traj``: CPU of ``parse_text_call`` on unclosed parameter tags.

One assistant message is ``<function=bash>`` followed by N ``<parameter=a>`` tags none of which is closed, then
``</function>`` (what a hostile or broken recording may hold: no call, since no parameter is closed). afa4c7c
searched for whole elements from every tag to the end of the body (quadratic in N). A well-formed call of N closed
parameters is measured too, to show the normal case did not get slower.

Each tree runs in its own interpreter; with ``--baseline`` the trees alternate run by run (the same load of the
moment) and the figures are the medians over the runs (this thread's CPU time, ms a call).

Run: python bench/bench_swe_text_calls.py [--baseline /tmp/base19/src] [--runs 5] [--tags 2000 8000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, time
from contextfold.importers.swe_agent import parse_text_call

out = {{}}
for n in {tags}:
    hostile = "<function=bash>" + "<parameter=a>" * n + "</function>"
    closed = "<function=bash>" + "".join(f"<parameter=p{{k}}>v{{k}}</parameter>" for k in range(n)) + "</function>"
    for name, text in (("unclosed", hostile), ("closed", closed)):
        began = time.thread_time()
        parse_text_call(text)
        out[f"{{name}} {{n}}"] = (time.thread_time() - began) * 1000
print(json.dumps(out))
"""


def _run(src: str, tags: list[int]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", _CHILD.format(tags=tags)], env=env, capture_output=True, text=True,
                          check=True)
    return {k: float(v) for k, v in json.loads(done.stdout).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", help="another tree's src/ to measure in the same runs")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tags", type=int, nargs="+", default=[3, 2_000, 8_000])
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parents[1] / "src")
    trees = {"this tree": here, **({"baseline": args.baseline} if args.baseline else {})}
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(args.runs):
        for name, src in trees.items():
            figures[name].append(_run(src, args.tags))
    print(f"load: {os.getloadavg()[0]:.1f}; CPU ms a call, median of {args.runs} runs")
    for name, runs in figures.items():
        cells = ", ".join(f"{key} {statistics.median(r[key] for r in runs):.3f}" for key in runs[0])
        print(f"{name:10} {cells}")


if __name__ == "__main__":
    main()
