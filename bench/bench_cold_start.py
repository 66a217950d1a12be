"""Cold start: the import of the public API, building a manager, and its first ``prepare()`` in a fresh interpreter.

Each figure is the minimum over ``--runs`` fresh interpreters (the minimum is the least disturbed by other load on a
shared machine). ``--baseline SRC`` runs the same measurements against another source tree (e.g. ``main``'s
``src``) in the same run, so the ratio is not skewed by the load of the moment.

Measured in the child, in order:

- ``python`` with nothing imported (the floor every figure below includes);
- ``from contextfold import ContextManager`` (wall and CPU time of the import alone);
- ``ContextManager(model="gpt-4o", store="memory", archive="memory")``;
- its first ``prepare()`` of a small history (a user message, an assistant tool call and its result);
- the first ``prepare()`` once the exact o200k encoder is needed (a history near the soft threshold).

Run: python bench/bench_cold_start.py [--runs 7] [--baseline /work/main/src]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, time
t0, c0 = time.perf_counter(), time.process_time()
from contextfold import ContextManager
t1, c1 = time.perf_counter(), time.process_time()
cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="cold")
t2 = time.perf_counter()
cm.add([{"role": "user", "content": "List the files and read setup.py."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "setup.py\nsrc\ntests\nREADME.md"}])
t3 = time.perf_counter()
cm.prepare()
t4 = time.perf_counter()
import sys
pydantic = "pydantic" in sys.modules
exact_loaded = any(getattr(c, "_encoding", None) is not None for c in [getattr(cm.counter, "counter", None)])
print(json.dumps({"import_ms": (t1 - t0) * 1000, "import_cpu_ms": (c1 - c0) * 1000,
                  "construct_ms": (t2 - t1) * 1000, "add_ms": (t3 - t2) * 1000, "first_prepare_ms": (t4 - t3) * 1000,
                  "pydantic_after_prepare": pydantic}))
"""

_BARE = "import time; t0 = time.perf_counter(); print((time.perf_counter() - t0) * 1000)"


def _run(code: str, src: str | None) -> str:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip().splitlines()[-1]


def _interpreter_ms(runs: int) -> float:
    import time

    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        best = min(best, (time.perf_counter() - t0) * 1000)
    return best


def measure(src: str | None, runs: int) -> dict[str, float]:
    results = [json.loads(_run(_CHILD, src)) for _ in range(runs)]
    keys = ("import_ms", "import_cpu_ms", "construct_ms", "add_ms", "first_prepare_ms")
    out: dict[str, float] = {k: min(r[k] for r in results) for k in keys}
    out["pydantic_after_prepare"] = float(any(r["pydantic_after_prepare"] for r in results))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", default=None, help="another src directory to measure in the same run")
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parent.parent / "src")
    trees = [("this tree", here)] + ([("baseline", args.baseline)] if args.baseline else [])
    print(f"python -c pass (whole process, min of {args.runs}): {_interpreter_ms(args.runs):.1f} ms")
    figures = {label: measure(src, args.runs) for label, src in trees}
    keys = ("import_ms", "import_cpu_ms", "construct_ms", "add_ms", "first_prepare_ms")
    print(f"{'':<12}" + "".join(f"{k:>18}" for k in keys))
    for label, fig in figures.items():
        print(f"{label:<12}" + "".join(f"{fig[k]:>18.1f}" for k in keys))
    if args.baseline:
        mine, base = figures["this tree"], figures["baseline"]
        print(f"{'ratio':<12}" + "".join(f"{base[k] / mine[k]:>17.1f}x" if mine[k] else f"{'':>18}" for k in keys))


if __name__ == "__main__":
    main()
