"""The proxy's SSE splitter (``serve/sse.py``): CPU to split a stream, trees side by side.

Each tree (``--trees``: src folders) runs in a fresh process per round, rounds interleaved; medians of the rounds.
Streams: 16 MiB with no blank line in 64 KiB chunks (a JSON body answering a stream request: held up to the
pass-through size, then passed on), and ordinary Chat events in 4 KiB chunks.

    python bench/bench_sse_splitter.py --trees /tmp/base20/src src --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

_EVENT = b'data: {"choices":[{"delta":{"content":"hello world"}}]}\n\n'


def _child() -> None:
    from contextfold.serve.sse import SseSplitter

    streams = {"16 MiB, no blank line": [b"x" * 65536] * 256,
               "1,000 events": [(_EVENT * 1000)[at:at + 4096] for at in range(0, len(_EVENT) * 1000, 4096)]}
    figures: dict[str, float] = {}
    for name, chunks in streams.items():
        started = time.process_time()
        splitter = SseSplitter()
        for chunk in chunks:
            for _ in splitter.feed(chunk):
                pass
        figures[name] = (time.process_time() - started) * 1000
    print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child()
        return
    runs: dict[str, list[dict[str, float]]] = {tree: [] for tree in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            out = subprocess.run([sys.executable, __file__, "--trees", tree, "--child"], check=True, text=True,
                                 capture_output=True, env={"PYTHONPATH": tree, "PATH": ""}).stdout
            runs[tree].append(json.loads(out))
    for tree, rounds in runs.items():
        cells = ", ".join(f"{name} {statistics.median(r[name] for r in rounds):.1f} ms" for name in rounds[0])
        print(f"{tree}: CPU median of {len(rounds)}: {cells}")


if __name__ == "__main__":
    main()
