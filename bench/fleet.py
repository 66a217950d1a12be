"""A fleet for real: W worker processes, one redis-server and one moto_server on loopback, S recorded sessions.

Every session's turns go to random workers (the next once the previous is answered); every ``--kill-every``
answered turns a random worker is SIGKILLed and started again, and its unanswered turns go to other workers.
Workers run background soft compactions from a shared queue when their inbox is empty. At the end every session's
view is archived, restored from the S3 archive alone and compared with what was sent (lost, duplicated, out of
order, other differences); every view sent was validated against the wire format by the worker that sent it.

Figures: turns/s, ``prepare()`` p50/p99 inside the workers (the view is in Redis, the tool outputs too), the whole
turn (load from Redis, add, prepare, save), optimistic-concurrency conflicts and retried attempts, kills, background
compactions applied and discarded, and the verification.

Run: python bench/fleet.py [--workers 8] [--sessions 500] [--window 8000] [--kill-every 250] [--max-turns 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from contextfold.testing.fleet import FleetConfig, run_fleet

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--data", default=str(DATA), help="recorded sessions (file or folder)")
    parser.add_argument("--window", type=int, default=8_000)
    parser.add_argument("--kill-every", type=int, default=250)
    parser.add_argument("--max-turns", type=int, default=0, help="turns per session at most (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = FleetConfig(workers=args.workers, sessions=args.sessions, data=args.data, window=args.window,
                         kill_every=args.kill_every, max_turns=args.max_turns, seed=args.seed)
    started = time.perf_counter()
    report = run_fleet(config, progress=lambda line: print(f"  … {line}", file=sys.stderr, flush=True))
    for line in report.lines():
        print(line)
    if report.errors:
        print(f"{len(report.errors)} turn errors (retried on another worker), first: {report.errors[:3]}")
    print(f"(whole run with start-up and verification: {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
