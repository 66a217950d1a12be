"""Compaction throughput: one full compaction of a 1.44M-token history with the extractive summarizer.

The history is 2,000 tool outputs of ~720 tokens each (cut from the recorded SWE-agent sessions' outputs, so the
text is real code, logs and listings), each after a user line and an assistant tool call. Automatic compaction
is off, so nothing happens until ``compact()`` is called; redaction and the archive are on (the default).
Prints the time of ``compact()``, the time spent in entity extraction and in redaction, and ms per million
tokens, wall and CPU (of the calling thread), and the process CPU of ``add()`` + ``compact()`` together (reading
moved from compaction to ``add()``, issue 22: the sum must not grow): cold (the compaction reads every message
itself) and warm (one ``prepare()`` first; the time the background thread takes to read the messages — entities
extracted, secrets scanned — while an agent would wait for its model, is shown apart).
``--baseline SRC`` measures another source tree in the same run (in a subprocess), for the ratio; ``--runs N``
repeats the trees alternately and ends with the medians.

Run: python bench/bench_compaction.py [--outputs 2000] [--baseline /work/main/src] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _bytecode import compiled

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"

_CHILD = r"""
import json, sys, time
from pathlib import Path
from contextfold.importers import load_sessions
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.summarize import entities
from contextfold.redact import _redactor as redact

outputs, data, warm = {outputs}, Path({data!r}), {warm}
pieces = []
for session in load_sessions(data / "sweagent-lm32b"):
    for m in session.messages:
        if len(m.text) > 3000:
            pieces.append(m.text)
    if len(pieces) > 400:
        break
# ~800 tokens per step: the history sits at ~60% of the window, over half the soft threshold (where the
# background extraction starts) and under hard; auto off, so that nothing but compact() compacts.
cm = ContextManager(model="gpt-4o", max_context_tokens=outputs * 1_300, store="memory", archive="memory",
                    session_id="throughput", policy={{"tool_output_budget_tokens": 10_000_000, "auto": False,
                                                     "emergency_message_count": 1_000_000}})
history = [Message("system", "You are a coding agent.")]
for i in range(outputs):
    text = pieces[i % len(pieces)]
    start = (i * 997) % max(1, len(text) - 2900)
    body = f"[output {{i}}]\n" + text[start:start + 2900]
    history.append(Message("user", f"step {{i}}: look at the next file"))
    history.append(Message("assistant", "", (ToolCall(f"c{{i}}", "bash", json.dumps({{"cmd": f"cat part_{{i}}"}})),)))
    history.append(Message("tool", body, tool_call_id=f"c{{i}}", name="bash"))
add_c0 = time.process_time()
cm.add(history)
add_cpu = time.process_time() - add_c0
tokens = cm.tokens()
warm_s = 0.0
if warm:
    # What an agent's turn gives the background thread: prepare(), then the model call (here: waiting for it).
    t0 = time.perf_counter()
    cm.prepare()
    try:
        from contextfold import _background
        _background.wait_idle()
    except ImportError:
        pass
    warm_s = time.perf_counter() - t0
spent = {{"entities": 0.0, "redact": 0.0}}
def timed(module, name, key):
    original = getattr(module, name)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[key] += time.perf_counter() - t0
    setattr(module, name, wrapper)
    return original
from contextfold.summarize import digest
timed(digest, "extract_entities_by_kind", "entities")
# (message-level redaction lives in redact/_messages since the twelfth session; Redactor.redact_message delegates)
try:
    from contextfold.redact._messages import MessageRedactor as _redacts_messages
except ImportError:
    _redacts_messages = redact.Redactor
_original_one = _redacts_messages.redact_message
def redact_message(self, m):
    t0 = time.perf_counter()
    try:
        return _original_one(self, m)
    finally:
        spent["redact"] += time.perf_counter() - t0
_redacts_messages.redact_message = redact_message
t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
report = cm.compact()
total, cpu, process_cpu = time.perf_counter() - t0, time.thread_time() - c0, time.process_time() - p0
print(json.dumps({{"tokens": tokens, "seconds": total, "cpu": cpu, "warm": warm_s, "entities": spent["entities"],
                  "add_cpu": add_cpu, "add_compact_cpu": add_cpu + process_cpu,
                  "redact": spent["redact"], "after": report.tokens_after, "compacted": report.compacted}}))
"""


def run(src: str, outputs: int, warm: bool) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": compiled(src)}  # (bytecode as installed: bench/_bytecode.py)
    code = _CHILD.format(outputs=outputs, data=str(DATA), warm=warm)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _row(label: str, f: dict[str, float]) -> None:
    per_million = f["seconds"] * 1000 / (f["tokens"] / 1e6)
    cpu_per_million = f.get("cpu", float("nan")) * 1000 / (f["tokens"] / 1e6)
    together_per_million = f["add_compact_cpu"] * 1000 / (f["tokens"] / 1e6)
    print(f"{label:<10} | {int(f['tokens']):>9} | {f['seconds']:>11.2f} | {f.get('cpu', float('nan')):>6.2f} | "
          f"{f['entities']:>10.2f} | {f['redact']:>11.2f} | {per_million:>16.0f} | {cpu_per_million:>13.0f} | "
          f"{f['warm']:>9.2f} | {f['add_cpu']:>11.2f} | {together_per_million:>25.0f} | "
          f"{int(f['compacted'])} -> {int(f['after'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outputs", type=int, default=2_000)
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parents[1] / "src")
    trees = [("this tree", here, False), ("this, warm", here, True)]
    if args.baseline:
        trees.append(("baseline", args.baseline, False))
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'tree':<10} | {'tokens':>9} | {'compact() s':>11} | {'CPU s':>6} | {'entities s':>10} | "
          f"{'redaction s':>11} | {'ms per 1M tokens':>16} | {'CPU ms per 1M':>13} | {'warm-up s':>9} | "
          f"{'add() CPU s':>11} | {'add+compact CPU ms per 1M':>25} | compacted -> tokens after")
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in trees}
    for _ in range(args.runs):
        for label, src, warm in trees:
            runs[label].append(run(src, args.outputs, warm))
            _row(label, runs[label][-1])
    rows = runs
    if args.runs > 1:
        print(f"medians of {args.runs} runs (load average now: {' '.join(f'{x:.1f}' for x in os.getloadavg())})")
        rows = {label: [{key: statistics.median(r[key] for r in found) for key in found[0]}]
                for label, found in runs.items()}
        for label, found in rows.items():
            _row(label, found[0])
    if args.baseline:
        base, this = rows["baseline"][-1], rows["this tree"][-1]
        ratio = base["seconds"] / this["seconds"]
        print(f"ratio (baseline / this tree, compact()): {ratio:.1f}x")
        # What moved from compact() to add() (issue 22: each message read once, when added) must not cost more.
        total = base["add_compact_cpu"] / this["add_compact_cpu"]
        print(f"ratio (baseline / this tree, add() + compact() CPU of the process): {total:.2f}x")


if __name__ == "__main__":
    main()
