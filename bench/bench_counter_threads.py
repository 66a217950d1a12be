"""One MessageCounter, two threads: the agent's ``count_message`` while another thread passes over a long view.

The telemetry thread counts a first call's figures with the manager's own counter (issue 22, lane s20d): its
``count_each`` over the cached view ran under the counter's lock for the whole pass, and the agent's counts waited on
it. Prints the pass's CPU (median of 7) and the agent's count latency during passes (median and p99 of 100 counts),
for this tree and, interleaved in the same run, for ``--baseline SRC``. Latencies are wall-clock: a loaded machine
swings them (say the load).

Run: python bench/bench_counter_threads.py [--runs 3] [--messages 100000] [--baseline /tmp/base20/src]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

MEASURE = """
import sys, threading, time
from contextfold.messages import Message
from contextfold.tokens import MessageCounter, TiktokenCounter
view = [Message.user(f"note {n} of the history") for n in range(int(sys.argv[1]))]
counter = MessageCounter(TiktokenCounter(), cache_size=3 * len(view))
counter.count_each(view)
cpu = []
for _ in range(7):
    t0 = time.process_time()
    counter.count_each(view)
    cpu.append(time.process_time() - t0)
stop = threading.Event()
def telemetry():
    while not stop.is_set():
        counter.count_each(view)
other = threading.Thread(target=telemetry)
other.start()
waits = []
probe = Message.user("probe")
for _ in range(100):
    t0 = time.perf_counter()
    counter.count_message(probe)
    waits.append(time.perf_counter() - t0)
    stop.wait(0.002)  # (the agent between two counts)
stop.set()
other.join()
cpu.sort(); waits.sort()
print(f"{cpu[3] * 1e3:.1f} {waits[50] * 1e3:.2f} {waits[98] * 1e3:.2f}")
"""


def _measure(src: str, messages: int) -> tuple[float, float, float]:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", MEASURE, str(messages)], capture_output=True, text=True, env=env,
                          check=True)
    cpu, median, p99 = (float(x) for x in done.stdout.split())
    return cpu, median, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--baseline", help="another source tree, measured interleaved with this one")
    args = parser.parse_args()
    trees = [("this tree", SRC)] + ([("baseline", args.baseline)] if args.baseline else [])
    print(f"load: {os.getloadavg()[0]:.2f}")
    for run in range(args.runs):
        for name, src in trees:
            cpu, median, p99 = _measure(src, args.messages)
            print(f"run {run + 1} {name:9}: count_each over {args.messages:,} cached, CPU {cpu:.1f} ms; the other "
                  f"thread's count_message during passes: median {median:.2f} ms, p99 {p99:.2f} ms")


if __name__ == "__main__":
    main()
