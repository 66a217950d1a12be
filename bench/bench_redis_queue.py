"""The fleet's Redis job queue with many sessions waiting: an offer's and a take's cost, trees side by side.

Each tree (``--trees``: src folders) gets its own queue on one real redis-server holding ``--waiting`` sessions;
rounds run interleaved, each in a fresh process importing that tree. Per operation: the client's wall time (a
loopback round trip; the client's CPU hardly differs) and the server's CPU per call (INFO commandstats), medians
over the rounds. Operations: an offer of a session already waiting (the tail), an offer of a new one, a take.

    python bench/bench_redis_queue.py --trees /tmp/base19/src src --waiting 100000 --rounds 5
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

OPS = 200


def _child(url: str, name: str, waiting: int) -> None:
    import redis

    from contextfold.stores.redis_queue import RedisJobQueue

    queue = RedisJobQueue(url, name=name)
    plain = redis.Redis.from_url(url)
    missing = waiting - len(queue)
    for n in range(missing):
        queue.offer(f"w{n:07d}")
    tail = f"w{waiting - 1:07d}"
    timings: dict[str, float] = {}
    server: dict[str, float] = {}

    def measure(label: str, step: object) -> None:
        plain.config_resetstat()
        start = time.perf_counter()
        for n in range(OPS):
            step(n)  # type: ignore[operator]
        timings[label] = (time.perf_counter() - start) / OPS * 1e6
        stats = plain.info("commandstats")
        server[label] = sum(v["usec"] for k, v in stats.items() if k not in ("cmdstat_config", "cmdstat_info")) / OPS

    measure("offer waiting", lambda n: queue.offer(tail))
    measure("offer new", lambda n: queue.offer(f"x{os.getpid()}-{n}"))
    measure("take", lambda n: queue.take())
    print(json.dumps({"wall_us": timings, "server_us": server, "waiting": len(queue)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", required=True)
    parser.add_argument("--waiting", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]))
        return
    from contextfold.testing.services import RedisServer

    with tempfile.TemporaryDirectory() as folder, RedisServer(folder) as server:
        results: dict[str, list[dict[str, dict[str, float]]]] = {tree: [] for tree in args.trees}
        for _ in range(args.rounds):
            for index, tree in enumerate(args.trees):
                env = {**os.environ, "PYTHONPATH": tree}
                out = subprocess.run([sys.executable, __file__, "--trees", tree, "--child", server.url,
                                      f"bench:q{index}", str(args.waiting)],
                                     env=env, check=True, capture_output=True, text=True).stdout
                results[tree].append(json.loads(out))
        print(f"{args.waiting} sessions waiting, {OPS} calls per figure, medians of {args.rounds} rounds, "
              f"load {os.getloadavg()[0]:.1f}")
        for tree, rounds in results.items():
            cells = []
            for label in rounds[0]["wall_us"]:
                wall = statistics.median(r["wall_us"][label] for r in rounds)
                cpu = statistics.median(r["server_us"][label] for r in rounds)
                cells.append(f"{label}: {wall:,.0f} us (server {cpu:,.1f})")
            print(f"{tree}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
