"""The agent loop of the recorded SWE-agent sessions, turn by turn: what masking turns and the read-ahead cost.

Issue 22's bars: a ``prepare()`` that masks takes at most 2 ms at the 99th percentile in the lm32b agent loop at a
16K window, and the background read-ahead (what the background thread reads while the agent waits for its model:
entities, secrets, digest material, archive lines) costs at most 150 ms of CPU per million tokens.

Each recorded session is replayed as an agent would run it: the messages before an assistant turn are added, then
``prepare()`` is timed (wall, and this thread's CPU time), then the background thread is given the time a model call
would take (``_background.wait_idle()``, not timed), then the recorded answer joins the history. Turns are sorted by
what ``prepare()`` did: masked (``maskings`` grew, no compaction), compacted, or neither. The read-ahead's CPU is the
thread CPU time of every job the background thread runs (``_background.submit``: entities, secrets, digest
material, transcript lines); it is divided by the tokens of every message added to the sessions (what there is to
read).

Each tree runs in its own interpreter; with ``--baseline`` the trees alternate run by run (the same load of the
moment). Figures pool the turns of every run; the spread of the per-run medians is printed too.

Masking turns get a table of their own: CPU p50/p90/p99 over the turns of every run pooled (the bar's p99 is the
2nd-slowest of a run's 161 turns, so one run's swings with the load by +-0.3 ms: pool at least 5 runs), and the
context switches during each call (``getrusage``: the agent's thread's where the system has ``RUSAGE_THREAD``, the
whole process's), which is how another thread's wake-up or the machine's load shows.

Run: python bench/bench_agent_loop.py [--baseline /tmp/perf-base/src] [--runs 5] [--window 16000] [--sessions 69]
     [--data DIR] (the lm32b sessions; by default found from this file, which a copy of the tree elsewhere must give)
     [--save FILE] (every run's figures, JSON) [--together] (the trees at once in each round: a run takes ~3 min of
     wall time on a quiet machine, ~90% of it the full collection before each turn) [--no-collect] (none: the
     read-ahead then meets the caches the agent's turn left, not those a full collection swept)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from _bytecode import compiled

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories" / "sweagent-lm32b"

_CHILD = r"""
import gc, json, resource, sys, threading, time
from pathlib import Path
from contextfold import _background
from contextfold.importers import load_sessions
from contextfold.manager import ContextManager

window, limit = {window}, {sessions}
ahead = {{"cpu": 0.0, "jobs": 0}}
_submit = _background.submit
def submit(job, *args):
    def timed(*args):
        c0 = time.thread_time()
        try:
            return job(*args)
        finally:
            ahead["cpu"] += time.thread_time() - c0
            ahead["jobs"] += 1
    return _submit(timed, *args)
_background.submit = submit

turns = {{"masked": [], "compacted": [], "plain": []}}
cpu = {{"masked": [], "compacted": [], "plain": []}}
# Context switches during each timed call: of the agent's thread alone where the system says (Linux), and of the
# whole process (every thread's, the background ones' included).
THREAD = getattr(resource, "RUSAGE_THREAD", None)
def switches(who):
    if who is None:
        return (0, 0)
    usage = resource.getrusage(who)
    return (usage.ru_nvcsw, usage.ru_nivcsw)
switched = {{"masked": [], "compacted": [], "plain": []}}  # (thread voluntary, involuntary, process vol., invol.)
added_tokens = 0
sessions = sorted(load_sessions(Path({data!r})), key=lambda s: s.id)[:limit]
for n, session in enumerate(sessions):
    cm = ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive="memory",
                        session_id=f"loop-{{n}}")
    cm.counter.wait_exact()
    added = 0
    messages = session.messages
    for index, answer in enumerate(messages):
        if answer.role != "assistant":
            continue
        pending = messages[added:index]
        if pending:
            added_tokens += sum(cm.counter.count_message(m) for m in pending)
            cm.add(pending)
            added = index
        maskings, compactions = cm.maskings, cm.compactions
        if {collect}:
            gc.collect()  # (a collection set off by the replay's own garbage is not the turn's)
        s0, p0 = switches(THREAD), switches(resource.RUSAGE_SELF)
        c0, t0 = time.thread_time(), time.perf_counter()
        cm.prepare()
        wall, used = (time.perf_counter() - t0) * 1000, (time.thread_time() - c0) * 1000
        s1, p1 = switches(THREAD), switches(resource.RUSAGE_SELF)
        kind = "compacted" if cm.compactions > compactions else "masked" if cm.maskings > maskings else "plain"
        turns[kind].append(wall)
        cpu[kind].append(used)
        switched[kind].append((s1[0] - s0[0], s1[1] - s0[1], p1[0] - p0[0], p1[1] - p0[1]))
        _background.wait_idle()  # the model call: the read-ahead runs now
        added_tokens += cm.counter.count_message(answer)
        cm.add(answer)
        added = index + 1
    cm.close()
print(json.dumps({{"turns": turns, "cpu": cpu, "switched": switched, "ahead_cpu": ahead["cpu"],
                  "ahead_jobs": ahead["jobs"], "added_tokens": added_tokens}}))
"""


def run(src: str, window: int, sessions: int, data: Path = DATA, collect: bool = True) -> dict[str, object]:
    return start(src, window, sessions, data, collect)()


def start(src: str, window: int, sessions: int, data: Path = DATA,
          collect: bool = True) -> Callable[[], dict[str, object]]:
    """Start one run of the loop with ``src``'s contextfold; the returned call waits for its figures.

    ``collect``: a full garbage collection before each ``prepare()`` (the default; see ``--no-collect``).
    """
    env = {**os.environ, "PYTHONPATH": compiled(src)}  # (bytecode as installed: bench/_bytecode.py)
    code = _CHILD.format(window=window, sessions=sessions, data=str(data), collect=collect)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)

    def figures() -> dict[str, object]:
        out, err = child.communicate()
        if child.returncode != 0:
            raise SystemExit(err[-3000:])
        done: dict[str, object] = json.loads(out.strip().splitlines()[-1])
        return done

    return figures


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=None, help="another tree's src directory, measured alternately")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--sessions", type=int, default=69, help="the first N lm32b sessions by id")
    parser.add_argument("--data", type=Path, default=DATA, help="the recorded lm32b sessions")
    parser.add_argument("--together", action="store_true",
                        help="run the trees at once in each round instead of one after the other (half the time)")
    parser.add_argument("--save", type=Path, default=None, help="write every run's figures there (JSON)")
    parser.add_argument("--no-collect", dest="collect", action="store_false",
                        help="no full garbage collection before each turn: the read-ahead then finds the caches as the "
                             "agent's turn left them, not swept by a collection (its figure is about a third lower on "
                             "the lm32b loop); a turn's own figures then include the collections the replay's garbage "
                             "sets off")
    args = parser.parse_args()
    if not args.data.is_dir():
        parser.error(f"--data: no directory {args.data} (give the shared sweagent-lm32b trajectories)")
    here = str(Path(__file__).resolve().parents[1] / "src")
    trees = [("this tree", here)] + ([("baseline", args.baseline)] if args.baseline else [])
    results: dict[str, list[dict[str, object]]] = {label: [] for label, _ in trees}
    loads = []
    for _ in range(args.runs):
        if args.together:  # (both trees at once: each run of a round meets the same load)
            loads.append(os.getloadavg()[0])
            waits = [(label, start(src, args.window, args.sessions, args.data, args.collect))
                     for label, src in trees]
            for label, wait in waits:
                results[label].append(wait())
            continue
        for label, src in trees:
            loads.append(os.getloadavg()[0])
            results[label].append(run(src, args.window, args.sessions, args.data, args.collect))
    how = (" (the trees at once)" if args.together else "") + ("" if args.collect else ", no collection before turns")
    print(f"window {args.window}, {args.sessions} sessions, {args.runs} runs{how}; load average (1 min) during the "
          "runs: "
          f"{min(loads):.1f}-{max(loads):.1f}")
    print(f"{'tree':<10} | {'turns':<9} | {'count':>5} | {'wall p50 ms':>11} | {'wall p99 ms':>11} | "
          f"{'CPU p50 ms':>10} | {'CPU p99 ms':>10} | {'per-run wall p99 ms':<28}")
    for label, runs in results.items():
        for kind in ("masked", "compacted", "plain"):
            wall = [w for r in runs for w in r["turns"][kind]]  # type: ignore[index]
            used = [c for r in runs for c in r["cpu"][kind]]  # type: ignore[index]
            per_run = [percentile(r["turns"][kind], 0.99) for r in runs]  # type: ignore[index]
            print(f"{label:<10} | {kind:<9} | {len(wall) // len(runs):>5} | {percentile(wall, 0.5):>11.2f} | "
                  f"{percentile(wall, 0.99):>11.2f} | {percentile(used, 0.5):>10.2f} | "
                  f"{percentile(used, 0.99):>10.2f} | {' '.join(f'{p:.2f}' for p in per_run)}")
    print("masking turns, CPU ms pooled over every run's turns; context switches per turn during the call (mean), "
          "of the agent's thread (voluntary/involuntary) and of the process; the CPU p99 of the turns the thread was "
          "not switched out in")
    print(f"{'tree':<10} | {'turns':>5} | {'p50':>5} | {'p90':>5} | {'p99':>5} | {'per-run CPU p99':<30} | "
          f"{'thread sw':>9} | {'process sw':>10} | {'p99 unswitched':>14}")
    for label, runs in results.items():
        used = [c for r in runs for c in r["cpu"]["masked"]]  # type: ignore[index]
        switched = [s for r in runs for s in r["switched"]["masked"]]  # type: ignore[index]
        per_run = [percentile(r["cpu"]["masked"], 0.99) for r in runs]  # type: ignore[index]
        calm = [c for c, s in zip(used, switched, strict=True) if s[0] + s[1] == 0]
        n = max(1, len(switched))
        print(f"{label:<10} | {len(used):>5} | {percentile(used, 0.5):>5.2f} | {percentile(used, 0.9):>5.2f} | "
              f"{percentile(used, 0.99):>5.2f} | {' '.join(f'{p:.2f}' for p in per_run):<30} | "
              f"{sum(s[0] for s in switched) / n:>4.2f}/{sum(s[1] for s in switched) / n:<4.2f} | "
              f"{sum(s[2] for s in switched) / n:>5.2f}/{sum(s[3] for s in switched) / n:<4.2f} | "
              f"{percentile(calm, 0.99):>6.2f} of {len(calm):<4}")
    if args.save:
        args.save.write_text(json.dumps(results))
    print(f"{'tree':<10} | read-ahead CPU ms per 1M tokens added (median of runs, min-max) | jobs per run")
    for label, runs in results.items():
        rates = [float(r["ahead_cpu"]) * 1000 / (float(r["added_tokens"]) / 1e6)  # type: ignore[arg-type]
                 for r in runs]
        print(f"{label:<10} | {statistics.median(rates):>8.0f} ({min(rates):.0f}-{max(rates):.0f}) of "
              f"{float(runs[0]['added_tokens']) / 1e6:.2f}M tokens | {runs[0]['ahead_jobs']}")


if __name__ == "__main__":
    main()
