"""``history_search`` against a session of many masked outputs: CPU per call at 100 / 1,000 / 10,000 outputs.

The session compacted ten times, each transcript the whole view then (the outputs so far, as compaction archives
them), every output masked (a 30-line, ~2 KB log kept whole in the session's cache). One ``HistorySearchTool`` is
called as an agent calls it: ``first`` (nothing read yet), ``again`` (nothing archived since: the median of the
next calls), and ``after new`` (one more transcript with 1% more outputs). The pattern is in one line of each
output (a literal and a regular expression, so each call scans every line either way). Each call is timed in this
thread's CPU time; each tree runs in its own interpreter, alternating run by run with ``--baseline``; the figures
are medians over the runs.

Run: python bench/bench_history_search_outputs.py [--baseline /tmp/base20/src] [--runs 5] [--sizes 100 1000 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_CHILD = r"""
import json, statistics, time
from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive.search import HistorySearchTool
from contextfold.cache import ToolOutputCache
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore

outputs, calls = {outputs}, {calls}
cache = ToolOutputCache(MemoryBlobStore(), session_id="bench-hs")
archive = Archive(MemoryArchiveStore())
view = [Message.user("go").with_meta(id="u")]

def add_outputs(start, count):
    for k in range(start, start + count):
        text = "\n".join(f"{{k:05d}}.{{i:02d}} INFO worker-{{i % 7}} GET /api/items/{{k * 31 + i}} 200 "
                         + ("needle_bench" if i == 17 else "ok") for i in range(30))
        ref = cache.put(text).id
        view.append(Message.tool(f"c{{k}}", f"[masked] ref={{ref}}", name="cat").with_meta(ref=ref, kind="masked",
                                                                                         id=f"m{{k}}"))

for step in range(10):
    add_outputs(step * outputs // 10, outputs // 10)
    archive.archive_transcript("bench-hs", list(view))
tool = HistorySearchTool(archive, "bench-hs", resolve_ref=cache.get)

def timed(pattern):
    call = ToolCall("c", "history_search", json.dumps({{"pattern": pattern}}))
    c0 = time.thread_time()
    answer = tool.execute_tool_call(call).text
    assert answer.startswith("history_search: "), answer[:200]
    return (time.thread_time() - c0) * 1000

figures = {{}}
for kind, pattern in (("literal", "needle_bench"), ("regex", "needle_b[e]nch")):
    figures[f"{{kind}} first"] = timed(pattern) if kind == "literal" else figures["literal first"]
    figures[f"{{kind}} again"] = statistics.median(timed(pattern) for _ in range(calls))
add_outputs(outputs, max(1, outputs // 100))
archive.archive_transcript("bench-hs", list(view))
figures["literal after new"] = timed("needle_bench")
print(json.dumps(figures))
"""


def run(src: str, outputs: int, calls: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", _CHILD.format(outputs=outputs, calls=calls)],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=None, help="another tree's src directory, measured alternately")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3, help="repeated calls per run (their median is 'again')")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    args = parser.parse_args()
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    trees = {"this tree": here, **({"baseline": args.baseline} if args.baseline else {})}
    print(f"load {os.getloadavg()[0]:.1f}; {args.runs} runs, CPU ms per call (median over runs)")
    for outputs in args.sizes:
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, src in trees.items():
                runs[name].append(run(src, outputs, args.calls))
        for name, figures in runs.items():
            keys = figures[0].keys()
            shown = ", ".join(f"{key} {statistics.median(f[key] for f in figures):.1f}" for key in keys)
            print(f"{outputs:>6} outputs, {name:>9}: {shown}")


if __name__ == "__main__":
    main()
