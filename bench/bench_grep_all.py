"""A grep over all of one session's outputs in a store shared with 20,000 outputs of other sessions.

``tool_output_cache_grep`` without a ``ref_id`` searches the outputs the calling session owns. Before the stores
kept an index of claims by session (``BlobStore.claimed_refs``, eleventh session) it found them by listing the whole
store: ~0.2 s a call at 20,000 other outputs, growing with the store. Here one store per backend (memory, SQLite,
and Redis when ``redis-server`` is installed) holds ``--others`` outputs of other sessions (10 each) and
``--mine`` of the caller's; each tree greps all of the caller's outputs ``--calls`` times in its own interpreter, the
trees alternating run by run (the same load of the moment). The SQLite file and the Redis database are filled once,
by this tree, and shared by both trees (an older tree ignores the index). Figures: per call, CPU (``process_time``)
and wall time, medians of each run's median; the median over the runs is printed.

Run: python bench/bench_grep_all.py [--base /tmp/base11/src] [--runs 5] [--others 20000] [--mine 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "src"
OUTPUTS_PER_OTHER_SESSION = 10

_FILL = r"""
import sys
backend, target, others, mine = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
store = open_store(backend, target)
fill(store, others, mine)
store.close()
"""

_COMMON = r"""
from contextfold.cache import ToolOutputCache

def open_store(backend, target):
    if backend == "memory":
        from contextfold.stores.memory import MemoryBlobStore
        return MemoryBlobStore()
    if backend == "sqlite":
        from contextfold.stores.local import LocalBlobStore
        return LocalBlobStore(target)
    from contextfold.stores.redis_blob import RedisBlobStore
    return RedisBlobStore(target, prefix="bench:grep-all")

def fill(store, others, mine):
    for s in range(others // PER):
        cache = ToolOutputCache(store, session_id=f"other-{s}")
        for k in range(PER):
            cache.put(f"session {s} output {k}\nsome line of output {s}-{k}\n")
    cache = ToolOutputCache(store, session_id="mine")
    for k in range(mine):
        cache.put(f"my output {k}\nneedle {k} here\n")
"""

_TIME = r"""
import json, statistics, sys, time
from contextfold.messages import ToolCall
backend, target, others, mine, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
store = open_store(backend, target)
if backend == "memory":
    fill(store, others, mine)
cache = ToolOutputCache(store, session_id="mine")
call = ToolCall("g", "tool_output_cache_grep", json.dumps({"pattern": "needle"}))
first = cache.execute_tool_call(call).text.splitlines()[0]
assert first == f"{mine} match(es) for /needle/ in {mine} cached output(s)", first
cpu, wall = [], []
for _ in range(calls):
    c0, w0 = time.process_time(), time.perf_counter()
    cache.execute_tool_call(call)
    cpu.append(time.process_time() - c0)
    wall.append(time.perf_counter() - w0)
store.close()
print(json.dumps({"cpu_ms": statistics.median(cpu) * 1e3, "wall_ms": statistics.median(wall) * 1e3}))
"""


def _child(src: str, code: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"child failed in {src}:\n{done.stderr[-3000:]}")
    return done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=None, help="another tree's src directory, measured alternately")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20, help="grep calls timed per run")
    parser.add_argument("--others", type=int, default=20_000, help="outputs of other sessions in the store")
    parser.add_argument("--mine", type=int, default=10, help="outputs of the calling session")
    parser.add_argument("--backends", default="memory,sqlite,redis")
    args = parser.parse_args(argv)
    common = _COMMON.replace("PER", str(OUTPUTS_PER_OTHER_SESSION))
    trees = [("this tree", str(HERE))] + ([("base", args.base)] if args.base else [])
    backends = args.backends.split(",")
    server: subprocess.Popen[bytes] | None = None
    with tempfile.TemporaryDirectory() as scratch:
        targets = {"memory": "-", "sqlite": str(Path(scratch) / "outputs")}
        if "redis" in backends:
            binary = shutil.which("redis-server")
            if binary is None:
                print("redis-server not installed: Redis skipped")
                backends.remove("redis")
            else:
                port = _free_port()
                server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                           "--appendonly", "no", "--dir", scratch],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                targets["redis"] = f"redis://127.0.0.1:{port}/0"
                _child(str(HERE), "import redis, time\nc = redis.Redis.from_url(__import__('sys').argv[1])\n"
                       "for _ in range(200):\n    try:\n        c.ping(); break\n    except redis.ConnectionError:\n"
                       "        time.sleep(0.05)\n", targets["redis"])
        try:
            for backend in backends:
                if backend != "memory":  # filled once, by this tree, and shared
                    _child(str(HERE), common + _FILL, backend, targets[backend], str(args.others), str(args.mine))
                results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
                for _ in range(args.runs):
                    for name, src in trees:
                        out = _child(src, common + _TIME, backend, targets[backend], str(args.others),
                                     str(args.mine), str(args.calls))
                        results[name].append(json.loads(out))
                for name, runs in results.items():
                    cpu = statistics.median(r["cpu_ms"] for r in runs)
                    wall = statistics.median(r["wall_ms"] for r in runs)
                    print(f"{backend:>6} {name:>9}: grep-all {cpu:8.2f} ms CPU, {wall:8.2f} ms wall per call "
                          f"({args.others:,} other outputs, {args.mine} of the session's; median of {args.runs} runs)")
        finally:
            if server is not None:
                server.kill()
                server.wait()


if __name__ == "__main__":
    main()
