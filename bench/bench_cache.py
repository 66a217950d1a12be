"""Benchmarks of the tool output cache on the local (SQLite) store. Prints figures; asserts nothing about speed.

1. Writing 10,000 tool outputs drawn from the shared sessions' size distribution (real outputs, each made unique so
   that content addressing does not dedupe them), through ``ToolOutputCache.put`` and ``process``.
2. Reading a 1,000-line slice of a 100 MB output: time, and peak Python memory during the read (tracemalloc).
3. The replay figures of the acceptance test: outputs cut at write time, outputs masked, peak tool-output tokens.

Run: /work/venv/bin/python bench/bench_cache.py [--outputs 10000] [--big-mb 100]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAJECTORIES = ROOT.parent / "shared" / "data" / "trajectories"

from contextfold.cache import ToolOutputCache, mask_tool_outputs  # noqa: E402
from contextfold.importers._files import load_sessions  # noqa: E402
from contextfold.messages import Message  # noqa: E402
from contextfold.stores.local import LocalBlobStore  # noqa: E402
from contextfold.stores.memory import MemoryBlobStore  # noqa: E402
from contextfold.tokens import MessageCounter, TiktokenCounter  # noqa: E402


def real_outputs() -> list[str]:
    outputs: list[str] = []
    for session in load_sessions(TRAJECTORIES):
        outputs.extend(m.text for m in session.messages if m.role == "tool")
    return outputs


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_writes(outputs: list[str], n: int, directory: Path) -> None:
    rng = random.Random(0)
    drawn = [f"[bench output {i}]\n{rng.choice(outputs)}" for i in range(n)]
    sizes = [len(t.encode()) for t in drawn]
    counter = TiktokenCounter("o200k_base")
    with LocalBlobStore(directory / "writes") as store:
        cache = ToolOutputCache(store, counter=counter, context_window=32_000)
        put_times: list[float] = []
        start = time.perf_counter()
        for text in drawn:
            t0 = time.perf_counter()
            cache.put(text)
            put_times.append(time.perf_counter() - t0)
        total = time.perf_counter() - start
        db_size = sum(p.stat().st_size for p in (directory / "writes").iterdir())
    print(f"== writing {n:,} tool outputs (sizes from {len(outputs):,} real outputs) to the local store")
    print(
        f"   sizes: median {statistics.median(sizes):,.0f} B, p90 {pct(sizes, 0.9):,.0f} B, "
        f"max {max(sizes):,} B, total {sum(sizes) / 1e6:.1f} MB"
    )
    print(
        f"   put: total {total:.2f} s, {n / total:,.0f} outputs/s, {sum(sizes) / 1e6 / total:.1f} MB/s; "
        f"per put median {statistics.median(put_times) * 1e3:.2f} ms, p99 {pct(put_times, 0.99) * 1e3:.2f} ms"
    )
    print(f"   database on disk: {db_size / 1e6:.1f} MB")

    with LocalBlobStore(directory / "process") as store:
        cache = ToolOutputCache(store, counter=counter, context_window=32_000)
        start = time.perf_counter()
        cut = 0
        for i, text in enumerate(drawn):
            out = cache.process(Message.tool(f"c{i}", text))
            cut += out.meta.get("kind") == "truncated"
        total = time.perf_counter() - start
    print(f"   process (check limits, cache and build the view when over): {total:.2f} s, {cut:,} outputs cut")


def bench_big_read(megabytes: int, directory: Path) -> None:
    template = "{:09d} lorem ipsum dolor sit amet, consectetur adipiscing elit {}\n"
    average = sum(len(template.format(i, "abcdefgh"[: i % 9])) for i in range(9)) / 9
    lines_needed = int(megabytes * 1_000_000 / average) + 1
    text = "".join(template.format(i, "abcdefgh"[: i % 9]) for i in range(1, lines_needed + 1))
    size = len(text.encode())
    with LocalBlobStore(directory / "big") as store:
        cache = ToolOutputCache(store)
        t0 = time.perf_counter()
        ref = cache.put(text)
        put_s = time.perf_counter() - t0
        del text
        fresh = ToolOutputCache(store)  # no remembered refs: the read loads the line index from the store
        middle = ref.line_count // 2
        t0 = time.perf_counter()
        result = fresh.read(ref.id, middle, 1_000)
        cold_s = time.perf_counter() - t0
        assert len(result.lines) == 1_000 and result.lines[0].startswith(f"{middle:09d} ")
        times = []
        for k in range(20):
            t0 = time.perf_counter()
            fresh.read(ref.id, 1 + (k * 7919 * 131) % (ref.line_count - 1_000), 1_000)
            times.append(time.perf_counter() - t0)
        tracemalloc.start()
        tracemalloc.reset_peak()
        ToolOutputCache(store).read(ref.id, middle, 1_000)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        t0 = time.perf_counter()
        found = fresh.grep(f"^{ref.line_count - 5:09d} ", ref.id)
        grep_s = time.perf_counter() - t0
        assert [m.line_number for m in found.matches] == [ref.line_count - 5]
    print(f"== a {size / 1e6:.0f} MB output ({ref.line_count:,} lines) in the local store")
    print(f"   put (hash, line index, chunked write): {put_s:.2f} s")
    print(
        f"   read 1,000 lines from the middle: first {cold_s * 1e3:.1f} ms, then median "
        f"{statistics.median(times) * 1e3:.1f} ms (20 random offsets); peak Python memory {peak / 1e3:.0f} KB"
    )
    print(f"   grep the whole output for a line near the end: {grep_s:.2f} s")


def replay_figures() -> None:
    counter = TiktokenCounter("o200k_base")
    mc = MessageCounter(counter)
    sessions = [s for s in load_sessions(TRAJECTORIES) if s.source == "swe_agent"]
    cut = masked = over = 0
    peak = 0
    invalidated: list[int] = []
    t0 = time.perf_counter()
    for session in sessions:
        cache = ToolOutputCache(MemoryBlobStore(), counter=counter, context_window=32_000)
        budget = cache.config.budget_tokens(32_000)
        view: list[Message] = []
        for m in session.messages:
            view.append(cache.process(m))
            cut += view[-1].meta.get("kind") == "truncated"
            result = mask_tool_outputs(view, budget_tokens=budget, counter=mc, cache=cache)
            view = result.messages
            if result.masked_indices:
                masked += len(result.masked_indices)
                invalidated.append(result.prefix_tokens_invalidated)
            peak = max(peak, result.tool_output_tokens)
        over += sum(mc.count_message(m) for m in session.messages if m.role == "tool") > budget
    took = time.perf_counter() - t0
    print(f"== replay of {len(sessions)} SWE-agent sessions, 32,000-token window (tool-output budget 20,000)")
    print(f"   sessions whose tool outputs exceed the budget: {over}; outputs cut at write time: {cut}")
    print(
        f"   outputs masked: {masked} in {len(invalidated)} masking passes; peak tool-output tokens in a view: "
        f"{peak:,}; prefix tokens invalidated per pass: median {statistics.median(invalidated or [0]):,.0f}"
    )
    print(f"   replay time (caching + masking after every message): {took:.2f} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outputs", type=int, default=10_000)
    parser.add_argument("--big-mb", type=int, default=100)
    args = parser.parse_args(argv)
    if not TRAJECTORIES.is_dir():
        sys.exit(f"shared data not found at {TRAJECTORIES}")
    with tempfile.TemporaryDirectory(prefix="contextfold-bench-") as tmp:
        directory = Path(tmp)
        bench_writes(real_outputs(), args.outputs, directory)
        bench_big_read(args.big_mb, directory)
    replay_figures()


if __name__ == "__main__":
    main()
