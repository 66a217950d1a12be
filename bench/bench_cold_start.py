"""Cold start: the import of the public API, a process's first manager, its first turn, in fresh interpreters.

Each child runs as an installed package does: with bytecode (without ``PYTHONDONTWRITEBYTECODE``, into a temporary
``PYTHONPYCACHEPREFIX``, after one warm-up run per tree that writes it), so the figures measure imports, not the
compiler (~100 ms more for the manager). Each figure is the minimum over ``--runs`` fresh interpreters (the least
disturbed by other load on a shared machine), the median beside it. ``--baseline SRC`` measures another source tree
(e.g. ``/tmp/base20/src``) in the same run, its children interleaved with this tree's.

Measured in the child, in order:

- ``import contextfold`` alone;
- ``from contextfold import ContextManager`` (the import of the manager; wall and CPU time of both imports);
- a process's first ``ContextManager(model="gpt-4o")``, then the best of five later ones (what every other manager
  of the process costs), twice: with the default stores (``default``: the local blob store and archive, written
  under a fresh temporary working directory per child) and in memory (``memory``: ``store="memory",
  archive="memory"``);
- the first manager's first ``add()`` of a small history (a user message, an assistant tool call and its result),
  and its first ``prepare()``;
- import → first view: from before ``import contextfold`` to the first ``prepare()``'s return (the five later
  constructions left out), wall and CPU time.

CPU times are the main thread's (``time.thread_time``): not the tokenizer's loading thread nor the telemetry worker.

Also reported: whether pydantic was imported by then (a default manager needs none), and the modules the first
construction imported (``from contextfold import ContextManager`` should have brought them all).

Run: python bench/bench_cold_start.py [--runs 7] [--baseline /tmp/base20/src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import json, sys, time
stores = {} if sys.argv[1] == "default" else {"store": "memory", "archive": "memory"}
clock, cpu = time.perf_counter, time.thread_time  # (CPU of the main thread: not the tokenizer's loading thread)
t0, c0 = clock(), cpu()
import contextfold
t1 = clock()
from contextfold import ContextManager
t2, c2 = clock(), cpu()
before = set(sys.modules)
cm = ContextManager(model="gpt-4o", session_id="cold", **stores)
t3, c3 = clock(), cpu()
construct_new = sorted(set(sys.modules) - before)
later = []
for i in range(5):
    s = clock()
    ContextManager(model="gpt-4o", session_id=f"cold{i}", **stores)
    later.append(clock() - s)
s, cs = clock(), cpu()
cm.add([{"role": "user", "content": "List the files and read setup.py."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "setup.py\nsrc\ntests\nREADME.md"}])
t4 = clock()
cm.prepare()
t5, c5 = clock(), cpu()
print(json.dumps({
    "import_contextfold_ms": (t1 - t0) * 1000, "import_ms": (t2 - t0) * 1000, "import_cpu_ms": (c2 - c0) * 1000,
    "first_construct_ms": (t3 - t2) * 1000, "first_construct_cpu_ms": (c3 - c2) * 1000,
    "later_construct_ms": min(later) * 1000, "first_add_ms": (t4 - s) * 1000, "first_prepare_ms": (t5 - t4) * 1000,
    "to_first_view_ms": ((t3 - t0) + (t5 - s)) * 1000,  # (the five later constructions left out)
    "to_first_view_cpu_ms": ((c3 - c0) + (c5 - cs)) * 1000,
    "construct_new_modules": construct_new, "pydantic": "pydantic" in sys.modules}))
"""

KEYS = ("import_contextfold_ms", "import_ms", "import_cpu_ms", "first_construct_ms", "first_construct_cpu_ms",
        "later_construct_ms", "first_add_ms", "first_prepare_ms", "to_first_view_ms", "to_first_view_cpu_ms")
LABELS = ("import cf", "import CM", "import CPU", "1st constr.", "1st constr. CPU", "later constr.", "1st add",
          "1st prepare", "import->view", "->view CPU")


STORES = ("default", "memory")


def _child_env(src: str, pycache: str, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("CONTEXTFOLD_")}
    env.update(PYTHONPATH=src, PYTHONPYCACHEPREFIX=pycache, HOME=home)
    return env


def _run(src: str, pycache: str, stores: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="cf-cold-") as workdir:  # (the default stores write under it)
        done = subprocess.run([sys.executable, "-c", _CHILD, stores], capture_output=True, text=True,
                              env=_child_env(src, pycache, workdir), cwd=workdir, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _interpreter_ms(runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        best = min(best, (time.perf_counter() - t0) * 1000)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", default=None, help="another src directory to measure in the same run")
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parent.parent / "src")
    trees = [("this tree", here)] + ([("baseline", args.baseline)] if args.baseline else [])
    cases = [(f"{label}, {stores}", src, stores) for stores in STORES for label, src in trees]
    results: dict[str, list[dict[str, object]]] = {case: [] for case, _, _ in cases}
    with tempfile.TemporaryDirectory(prefix="cf-pycache-") as pycache:
        for _, src in trees:
            _run(src, pycache, "memory")  # warm-up: writes the bytecode, as an installed package has it
        print(f"python -c pass (whole process, min of {args.runs}): {_interpreter_ms(args.runs):.1f} ms")
        for _ in range(args.runs):  # interleaved: both trees see the same load
            for case, src, stores in cases:
                results[case].append(_run(src, pycache, stores))
    print(f"min (median) of {args.runs} fresh interpreters, ms")
    print(f"{'':<20}" + "".join(f"{name:>17}" for name in LABELS))
    mins: dict[str, dict[str, float]] = {}
    for case, runs in results.items():
        values = {k: [float(r[k]) for r in runs] for k in KEYS}  # type: ignore[arg-type]
        mins[case] = {k: min(v) for k, v in values.items()}
        print(f"{case:<20}" + "".join(f"{min(v):>8.1f} ({statistics.median(v):>6.1f})" for v in values.values()))
    if args.baseline:
        for stores in STORES:
            mine, base = mins[f"this tree, {stores}"], mins[f"baseline, {stores}"]
            print(f"{'ratio, ' + stores:<20}"
                  + "".join(f"{base[k] / mine[k]:>16.2f}x" if mine[k] else f"{'':>17}" for k in KEYS))
    for label, runs in results.items():
        new = runs[0]["construct_new_modules"]
        assert isinstance(new, list)
        print(f"{label}: pydantic loaded by the first view: {any(r['pydantic'] for r in runs)}; "
              f"modules the first construction imported: {len(new)}"
              + (f" ({', '.join(m for m in new if m.startswith('contextfold'))[:300]})" if new else ""))


if __name__ == "__main__":
    main()
