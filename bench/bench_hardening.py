"""Benchmarks of issue 12's slow paths. Prints figures; asserts nothing about speed.

1. The compaction loop: default policy, a 10,000-message history in which every 4th message is a short user
   request. The first ``prepare()`` compacts (emergency: the message cap); the median of the next ones is what
   every later turn pays (target ≤ 1 ms; before the fix every call compacted again, 200-470 ms).
2. ``add()`` of one 10 MB user message (target ≤ 1 s), with text that tokenizes like prose and like a log.
3. The first ``prepare()`` of a 100,000-message history (target ≤ 3 s), the tokenizer loaded beforehand (loading
   it is a cold-start cost of its own).

Run: python bench/bench_hardening.py [--messages 100000] [--turns 50]
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import time

from contextfold.manager import ContextManager
from contextfold.messages import Message


def short_user_history(count: int) -> list[Message]:
    out: list[Message] = []
    for i in range(count):
        if i % 4 == 0:
            out.append(Message.user(f"do step {i}"))
        else:
            out.append(Message.assistant(f"working on item {i}: lorem ipsum dolor sit amet"))
    return out


def fresh_manager() -> ContextManager:
    return ContextManager("gpt-4o", store="memory", archive="memory")


def bench_loop(turns: int) -> None:
    cm = fresh_manager()
    cm.add(short_user_history(10_000))
    started = time.perf_counter()
    cm.prepare()
    first = (time.perf_counter() - started) * 1000
    times: list[float] = []
    for i in range(turns):
        cm.add([Message.user(f"next {i}"), Message.assistant("ok")])
        started = time.perf_counter()
        cm.prepare()
        times.append((time.perf_counter() - started) * 1000)
    print(f"loop: first prepare {first:.0f} ms, then median {statistics.median(times):.3f} ms "
          f"(max {max(times):.1f} ms) over {turns} turns; {cm.compactions} compaction(s), "
          f"{len(cm.messages())} messages in the view")


def random_words(size: int, rng: random.Random) -> str:
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(5_000)]
    out: list[str] = []
    total = 0
    while total < size:
        line = " ".join(rng.choices(words, k=12)) + "\n"
        out.append(line)
        total += len(line)
    return "".join(out)[:size]


def bench_big_add() -> None:
    rng = random.Random(7)
    prose = random_words(10 * 1024 * 1024, rng)
    log = "".join(f"2025-01-01T00:00:{i % 60:02d} INFO worker-{i % 17} handled request {rng.getrandbits(64):x}\n"
                  for i in range(150_000))[: 10 * 1024 * 1024]
    for name, text in (("prose", prose), ("log", log)):
        cm = fresh_manager()
        cm.add(Message.user("warm the tokenizer"))
        started = time.perf_counter()
        cm.add(Message.user(text))
        added = time.perf_counter() - started
        started = time.perf_counter()
        cm.tokens()
        counted = time.perf_counter() - started
        print(f"add 10 MB ({name}): add {added:.3f} s, then tokens() {counted:.3f} s")


def bench_first_prepare(count: int) -> None:
    cm = fresh_manager()
    cm.counter.wait_exact()  # (a lazy counter would count byte bounds until the tokenizer arrives, then recount)
    history = short_user_history(count)
    started = time.perf_counter()
    cm.add(history)
    added = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    cm.prepare()
    prepared, prepared_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"{count:,} messages: add {added:.2f} s, first prepare {prepared:.2f} s ({prepared_cpu:.2f} s CPU) "
          f"({len(cm.messages())} messages after, {cm.compactions} compaction)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=50)
    args = parser.parse_args()
    bench_loop(args.turns)
    bench_big_add()
    bench_first_prepare(args.messages)


if __name__ == "__main__":
    main()
