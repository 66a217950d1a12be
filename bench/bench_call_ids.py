"""Encoding a history of 1,000 messages (500 tool calls) in each wire format: the cost of naming its call ids.

Each tree (``--trees``: src folders) is timed in a process of its own, rounds interleaved; CPU time of one encode,
best of 20 per round, median over the rounds. ``--foreign`` gives every tenth call an id each API refuses;
``--reused`` gives every call one id (an agent whose ids come back: Anthropic names each call after the ones before
it), ``--calls N`` sets the number of calls.

    python bench/bench_call_ids.py --trees /tmp/base19/src src --rounds 7
    python bench/bench_call_ids.py --trees /tmp/base20/src src --reused --calls 5000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

FORMATS = ("openai_chat", "anthropic", "openai_responses")


def _child(foreign: bool, reused: bool, calls: int) -> None:
    from contextfold.formats import get_format
    from contextfold.messages import Message, ToolCall

    history: list[Message] = []
    for n in range(calls):
        call_id = f"functions.bash:{n}" if foreign and n % 10 == 0 else f"call_{0 if reused else n:024d}"
        history.append(Message("assistant", "", tool_calls=(ToolCall(call_id, "bash", json.dumps({"n": n})),)))
        history.append(Message.tool(call_id, f"output {n}"))
    figures = {}
    for name in FORMATS:
        encode = get_format(name).encode
        best = float("inf")
        for _ in range(20):
            start = time.process_time()
            encode(history)
            best = min(best, time.process_time() - start)
        figures[name] = best * 1e3
    print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--foreign", action="store_true")
    parser.add_argument("--reused", action="store_true")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.foreign, args.reused, args.calls)
        return
    results: dict[str, list[dict[str, float]]] = {tree: [] for tree in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            command = [sys.executable, __file__, "--trees", tree, "--child", "--calls", str(args.calls),
                       *(["--foreign"] if args.foreign else []), *(["--reused"] if args.reused else [])]
            out = subprocess.run(command, env={**os.environ, "PYTHONPATH": tree}, check=True, capture_output=True,
                                 text=True).stdout
            results[tree].append(json.loads(out))
    shape = (" (1 in 10 refused ids)" if args.foreign else "") + (" (all one id)" if args.reused else "")
    print(f"{2 * args.calls:,} messages, {args.calls:,} calls{shape}; ms CPU, medians of "
          f"{args.rounds} rounds (best of 20 each), load {os.getloadavg()[0]:.1f}")
    for tree, rounds in results.items():
        print(f"{tree}: " + "; ".join(f"{name} {statistics.median(r[name] for r in rounds):.2f}" for name in FORMATS))


if __name__ == "__main__":
    main()
