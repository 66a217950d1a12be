"""The model-facing search tools over one long output: CPU per call of ``tool_output_cache_grep``, ``history_search``.

One cut tool output of 100,000 log lines (8.8 MB) is searched for a pattern that is in none of them, so each call
scans every line, once as a literal (``zzz_absent``, found without the engine) and once as a regular expression
(``zzz_abs[e]nt``, each line through the engine): the grep streams the output from the cache's store,
history_search reads it back in full through the session's cache (``resolve_ref``). Each call is timed in this
thread's CPU time; a run makes ``--calls`` calls of each and reports their median.

Each tree runs in its own interpreter; with ``--baseline`` the trees alternate run by run (the same load of the
moment) and the figures are the medians over the runs.

Run: python bench/bench_search_lines.py [--baseline /tmp/base11/src] [--runs 5] [--calls 3] [--lines 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, statistics, time
from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive.search import HistorySearchTool
from contextfold.cache import ToolOutputCache
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore

lines, calls = {lines}, {calls}
text = "\n".join(
    f"{{i:06d}} INFO worker-{{i % 7}} GET /api/v1/items/{{i * 7919 % 100000}} took {{i % 997}} ms status=200 "
    f"trace=bench{{i:08x}}"
    for i in range(lines))
cache = ToolOutputCache(MemoryBlobStore())
ref = cache.put(text)
archive = Archive(MemoryArchiveStore())
cut = Message.tool("c0", f"[cut] ref={{ref.id}}", name="cat").with_meta(ref=ref.id, kind="truncated", id="m0")
archive.archive_transcript("bench-search", [Message.user("go").with_meta(id="u"), cut])
history = HistorySearchTool(archive, "bench-search", resolve_ref=lambda r: text)
def call(tool, pattern):
    return ToolCall("c", tool, json.dumps({{"pattern": pattern}}))

def timed(run):
    spent = []
    for _ in range(calls):
        c0 = time.thread_time()
        answer = run()
        spent.append((time.thread_time() - c0) * 1000)
    assert "0 match" in answer.text or "no match" in answer.text, answer.text[:200]
    return statistics.median(spent)

figures = {{"bytes": len(text.encode())}}
for kind, pattern in (("literal", "zzz_absent"), ("regex", "zzz_abs[e]nt")):
    grep, search = call("tool_output_cache_grep", pattern), call("history_search", pattern)
    figures[f"grep {{kind}}"] = timed(lambda: cache.execute_tool_call(grep))
    figures[f"history_search {{kind}}"] = timed(lambda: history.execute_tool_call(search))
print(json.dumps(figures))
"""


def run(src: str, lines: int, calls: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", _CHILD.format(lines=lines, calls=calls)],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=None, help="another tree's src directory, measured alternately")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3, help="calls of each tool per run (their median is kept)")
    parser.add_argument("--lines", type=int, default=100_000)
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parents[1] / "src")
    trees = [("this tree", here)] + ([("baseline", args.baseline)] if args.baseline else [])
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
    loads = []
    for _ in range(args.runs):
        for label, src in trees:
            loads.append(os.getloadavg()[0])
            results[label].append(run(src, args.lines, args.calls))
    size = results[trees[0][0]][0]["bytes"]
    print(f"{args.lines:,} lines ({size / 1e6:.1f} MB), {args.runs} runs of {args.calls} calls; load average (1 min) "
          f"during the runs: {min(loads):.1f}-{max(loads):.1f}")
    print(f"{'tree':<10} | {'tool':<22} | {'CPU ms per call (median of runs)':>32} | per-run medians")
    for label, runs in results.items():
        for tool in ("grep literal", "history_search literal", "grep regex", "history_search regex"):
            per_run = [r[tool] for r in runs]
            print(f"{label:<10} | {tool:<22} | {statistics.median(per_run):>32.1f} | "
                  f"{' '.join(f'{v:.0f}' for v in per_run)}")


if __name__ == "__main__":
    main()
