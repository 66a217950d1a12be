"""A session's secret memory saved as it learns: total bytes written to the store and the time of the saves.

A session learns ``--secrets`` distinct secrets and saves its memory every ``--every`` of them (what
``catch_up`` does once a turn), into a local blob store (SQLite, in a temporary directory); then a fresh memory
loads it. Figures: bytes put into the store (all keys), CPU and wall seconds of the saves, of the load, and the
stored size. Each tree runs in a fresh interpreter, alternating run by run (``--base SRC``: another tree in the
same run); the median of ``--runs``. Nothing here asserts on time.

Run: python bench/bench_secret_memory.py [--base /tmp/base13/src] [--runs 3] [--secrets 10000] [--every 10]
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

_RUN = r"""
import json, sys, tempfile, time
from contextfold.redact import SecretMemory
from contextfold.stores.local import LocalBlobStore

secrets, every = int(sys.argv[1]), int(sys.argv[2])

class Counting(LocalBlobStore):
    written = 0
    def put(self, key, data):
        Counting.written += len(data)
        super().put(key, data)
    def put_new(self, key, data):  # (the records, from 97f801b on)
        stored = super().put_new(key, data)
        Counting.written += len(data) if stored else 0
        return stored
    def put_if(self, key, data, expected):  # (the note and the bases, from s15r on; expected None: a put_new)
        done = super().put_if(key, data, expected)
        Counting.written += len(data) if done and data is not None and expected is not None else 0
        return done

with tempfile.TemporaryDirectory() as directory, Counting(directory) as store:
    memory = SecretMemory(store, "bench-session")
    save_cpu = save_wall = 0.0
    for i in range(secrets):
        memory.learn(f"Kx{i:06d}q9Zm{i * 7919 % 1000003:07d}Tb", "password")
        if (i + 1) % every == 0:
            c0, w0 = time.process_time(), time.perf_counter()
            memory.save()
            save_cpu += time.process_time() - c0
            save_wall += time.perf_counter() - w0
    memory.save()
    c0, w0 = time.process_time(), time.perf_counter()
    loaded = len(SecretMemory(store, "bench-session").values())
    load_cpu, load_wall = time.process_time() - c0, time.perf_counter() - w0
    stored = sum(e.size for e in store.entries() if e.key.startswith("session-secrets."))
    keys = sum(1 for e in store.entries() if e.key.startswith("session-secrets."))
print(json.dumps({"written_mb": Counting.written / 1e6, "stored_mb": stored / 1e6, "keys": keys,
                  "save_cpu_s": save_cpu, "save_wall_s": save_wall, "load_cpu_ms": load_cpu * 1000,
                  "load_wall_ms": load_wall * 1000, "loaded": loaded}))
"""


def _run(src: str, secrets: int, every: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": compiled(src)}  # (bytecode as installed: bench/_bytecode.py)
    out = subprocess.run([sys.executable, "-c", _RUN, str(secrets), str(every)], env=env, capture_output=True,
                         text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=None, help="another src directory, measured in the same run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--secrets", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=10)
    args = parser.parse_args()
    trees = [("this tree", str(HERE.parent / "src"))] + ([("base", args.base)] if args.base else [])
    figures: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for run in range(args.runs):
        for name, src in trees if run % 2 == 0 else trees[::-1]:
            result = _run(src, args.secrets, args.every)
            figures[name].append(result)
            print(f"run {run + 1} | {name} | {json.dumps(result)} | load {os.getloadavg()[0]:.1f}")
    for name, results in figures.items():
        medians = {k: statistics.median(r[k] for r in results) for k in results[0]}
        print(f"{name:9} | " + ", ".join(f"{k} {v:.4g}" for k, v in medians.items()))
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
