"""Issue 22's scale figures, each in a fresh interpreter, this tree and (``--base SRC``) another in the same run.

- ``construct``: ``ContextManager(model="gpt-4o")`` right after ``from contextfold import ContextManager`` (the first
  one of the process: its imports included), and a second one; CPU ms, the least of ``--runs`` interpreters.
- ``idle``: threads held by 1,000 idle managers (each added and prepared one turn, then left open), and by 200
  managers dropped without ``close()``.
- ``huge``: ``add()`` of one user message of 10 MB (and 50 MB) of log lines, then the next ``prepare()``: wall and
  CPU seconds, the peak resident memory above what the process held before, as a multiple of the message's size,
  and what the view keeps of it.
- ``recorded``: 100,000 messages of the shared SWE-agent sessions (lm32b, repeated), default manager: ``add()``,
  the first ``prepare()`` (which compacts), and the peak resident memory of the process. The 3,388 messages of the
  69 sessions come back ~30 times: what contextfold remembers by content (counts, views, readings, redactions) is
  computed for the first pass only, so a history of 100,000 distinct messages costs more than this figure.
- ``distinct`` (not run by default): the same, each pass's texts made its own (a line naming the pass appended to
  every text content), so nothing is remembered from one pass to the next: what a history of distinct messages costs.

Each figure is a median over ``--runs`` interpreters (each run's figures are printed as it ends, with the load
average); the trees alternate run by run. CPU time is ``time.process_time`` (all threads); peak memory is
``ru_maxrss``. Nothing here asserts on time.

Run: python bench/bench_scale.py [--base /tmp/perf-base/src] [--runs 5] [--only construct idle huge recorded distinct]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _bytecode import compiled

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[1] / "shared" / "data" / "trajectories" / "sweagent-lm32b"

_CONSTRUCT = r"""
import json, time
from contextfold import ContextManager
c0 = time.process_time()
cm = ContextManager(model="gpt-4o")
c1 = time.process_time()
cm2 = ContextManager(model="gpt-4o")
c2 = time.process_time()
print(json.dumps({"first_ms": (c1 - c0) * 1000, "second_ms": (c2 - c1) * 1000}))
"""

_IDLE = r"""
import gc, json, threading, tempfile, os
os.chdir(tempfile.mkdtemp())
from contextfold import ContextManager
before = threading.active_count()
kept = []
for i in range(1000):
    cm = ContextManager(model="gpt-4o", session_id=f"idle{i}")
    cm.add([{"role": "user", "content": f"task {i}"}, {"role": "assistant", "content": "ok"}])
    cm.prepare()
    kept.append(cm)
idle = threading.active_count() - before
for i in range(200):
    cm = ContextManager(model="gpt-4o", session_id=f"dropped{i}")
    cm.add([{"role": "user", "content": f"task {i}"}])
    cm.prepare()
    del cm
gc.collect()
dropped = threading.active_count() - before - idle
print(json.dumps({"idle_threads": idle, "dropped_threads": dropped}))
import sys; sys.stdout.flush(); os._exit(0)
"""

_HUGE = r"""
import json, resource, time, random
from contextfold import ContextManager
size = {size}
rng = random.Random(0)
words = ["GET", "/api/v1/items", "200", "took", "12ms", "user_id=42", "INFO", "WARN", "cache", "miss", "retry"]
line = lambda i: f"2025-01-01T00:00:{{i % 60:02d}} " + " ".join(rng.choice(words) for _ in range(12))
parts, total, i = [], 0, 0
while total < size:
    s = line(i); parts.append(s); total += len(s) + 1; i += 1
text = "\n".join(parts)[:size]
cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="huge")
cm.add([{{"role": "user", "content": "hello"}}, {{"role": "assistant", "content": "hi"}}])
cm.prepare(); cm.tokens()
base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0, c0 = time.perf_counter(), time.process_time()
cm.add([{{"role": "user", "content": text}}])
del text, parts
t1, c1 = time.perf_counter(), time.process_time()
view = cm.prepare_messages()
t2, c2 = time.perf_counter(), time.process_time()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
kept = max(len(m.text) for m in view if m.role == "user")
print(json.dumps({{"add_s": t1 - t0, "prepare_s": t2 - t1, "cpu_s": c2 - c0, "peak_x": (peak - base_rss) / size,
                  "kept_chars": kept}}))
"""

_RECORDED = r"""
import json, resource, time
from pathlib import Path
from contextfold.importers import load_sessions
from contextfold.manager import ContextManager
from dataclasses import replace
sessions = load_sessions(Path({data!r}))
history = []
passes = 0
while len(history) < 100_000:
    for s in sessions:
        for m in s.messages:
            if m.role == "system" and history:
                continue
            if {distinct} and passes and isinstance(m.content, str):  # each pass's texts its own
                m = replace(m, content=f"{{m.content}}\n(pass {{passes}})")
            history.append(m)
    passes += 1
history = history[:100_000]
cm = ContextManager("gpt-4o", store="memory", archive="memory", session_id="recorded")
cm.tokens()
t0, c0 = time.perf_counter(), time.process_time()
cm.add(history)
t1, c1 = time.perf_counter(), time.process_time()
cm.prepare()
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({{"add_s": t1 - t0, "add_cpu_s": c1 - c0, "prepare_s": t2 - t1, "prepare_cpu_s": c2 - c1,
                  "total_s": t2 - t0, "total_cpu_s": c2 - c0,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "view": len(cm.messages())}}))
"""


def run(src: str, code: str, timeout: float = 1800) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": compiled(src)}  # (bytecode as installed: bench/_bytecode.py)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{src}: {done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=None, help="another src directory, measured in the same run")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", nargs="+", default=["construct", "idle", "huge", "recorded"])
    parser.add_argument("--huge-mb", type=int, nargs="+", default=[10, 50])
    args = parser.parse_args()
    trees = [("this tree", str(HERE.parent / "src"))] + ([("base", args.base)] if args.base else [])
    jobs: list[tuple[str, str]] = []
    if "construct" in args.only:
        jobs.append(("construct", _CONSTRUCT))
    if "idle" in args.only:
        jobs.append(("idle", _IDLE))
    if "huge" in args.only:
        jobs += [(f"huge {mb} MB", _HUGE.format(size=mb * 1_000_000)) for mb in args.huge_mb]
    if "recorded" in args.only:
        jobs.append(("recorded 100k", _RECORDED.format(data=str(DATA), distinct=False)))
    if "distinct" in args.only:
        jobs.append(("distinct 100k", _RECORDED.format(data=str(DATA), distinct=True)))
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for r in range(args.runs):
        for name, code in jobs:
            for label, src in trees if r % 2 == 0 else trees[::-1]:
                figures = run(src, code)
                results.setdefault((name, label), []).append(figures)
                # Each run as it ends (a long run interrupted still leaves its figures), with the load it saw.
                print(f"run {r + 1} {name} | {label} | {json.dumps(figures)} | load {os.getloadavg()[0]:.1f}",
                      flush=True)
    print()
    for name, _ in jobs:
        for label, _ in trees:
            rows = results[(name, label)]
            keys = rows[0].keys()
            figures = ", ".join(f"{k} {_fmt(statistics.median(r[k] for r in rows))}"
                                + (f" (min {_fmt(min(r[k] for r in rows))})" if name == "construct" else "")
                                for k in keys)
            print(f"{name:<14} | {label:<9} | {figures}")
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


if __name__ == "__main__":
    main()
