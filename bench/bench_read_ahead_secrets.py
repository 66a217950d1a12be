"""The secrets side of the background read-ahead in the lm32b agent loop: its parts, and the joined check's bound.

Issue 22's bar: the read-ahead costs at most 150 ms of CPU per million tokens added (``bench_agent_loop.py``).
``bench_read_ahead_parts.py`` splits the whole; this splits what the read-ahead asks of the session's secrets:

- the joined check: a light digest asks the secrets once about the candidates it walked, joined by line ends
  (``Redactor.mentions_secret`` from ``cache/_light_digest.light_digest``), and the part of it that is the patterns'
  scan of that new text (``Scanner.findings``);
- long outputs' secrets: a light digest of an output too long to read learns its secrets (``Redactor.learn_text``);
  how many of those texts the scan cache already held (scanned by ``add()`` or an earlier read-ahead);
- whole outputs' secrets: the outputs cut at write time before ``add()`` read (``SessionSecrets.read_ahead``);
- the redaction of what ``add()`` did not redact (``Redactor.redact_ahead`` in the read-ahead: the messages added
  before half the soft threshold, once a session).

Each run is also played with the joined check answered without scanning its text (only the memory's part,
``SecretMemory.shares_piece``): not a redaction anyone should ship (a rule that finds a value in an item alone is
what keeps it out of the digest), but the most any cheaper way of answering it could save. The variants of a
round run at once (the same load of the moment); figures are medians over the rounds.

Run: python bench/bench_read_ahead_secrets.py [--runs 3] [--sessions 69] [--window 16000] [--src SRC]
     [--data DIR] (``--src``: another tree's src directory; by default this file's tree)
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
from _timing import DATA

_CHILD = r"""
import json, sys, threading, time
from collections import Counter
sys.path.insert(0, {bench!r})
from pathlib import Path
from _timing import replay_loop
from contextfold import _background
from contextfold.cache import _light_digest
from contextfold.manager import _compactor, _read_ahead, _secrets
from contextfold.redact import _redactor, _scanner

unscanned = {unscanned!r}
inside = threading.local()  # (set while a read-ahead job runs: the parts are counted there only)
cpu, calls, misses = Counter(), Counter(), Counter()
_submit = _background.submit
def submit(job, *args):
    def run(*a):
        inside.on = True
        started = time.thread_time()
        try:
            return job(*a)
        finally:
            inside.on = False
            cpu["read-ahead"] += time.thread_time() - started
    return _submit(run, *args)
_background.submit = submit

def callers(owner, name, labels, count_misses=False):
    # (owner.name timed in a read-ahead job under the label of the function calling it: labels maps code -> label)
    inner = getattr(owner, name)
    def part(self, *a, **k):
        label = labels.get(sys._getframe(1).f_code) if getattr(inside, "on", False) else None
        if label is None:
            return inner(self, *a, **k)
        if count_misses and self._scanner.scans.get(a[0]) is None:
            misses[label] += 1
        started = time.thread_time()
        try:
            return inner(self, *a, **k)
        finally:
            cpu[label] += time.thread_time() - started
            calls[label] += 1
    setattr(owner, name, part)

light = _light_digest.light_digest.__code__
mentions = _redactor.Redactor.mentions_secret
def joined_check(self, text):
    if not getattr(inside, "on", False) or sys._getframe(1).f_code is not light:
        return mentions(self, text)
    inside.joined = True
    started = time.thread_time()
    try:
        if unscanned:  # (the memory's part only: what is left if the patterns' part cost nothing)
            return bool(self.enabled and self.remember and self.memory.shares_piece(text))
        return mentions(self, text)
    finally:
        inside.joined = False
        cpu["joined check"] += time.thread_time() - started
        calls["joined check"] += 1
_redactor.Redactor.mentions_secret = joined_check
findings = _scanner.Scanner.findings
def findings_timed(self, text):
    if not getattr(inside, "joined", False):
        return findings(self, text)
    started = time.thread_time()
    try:
        return findings(self, text)
    finally:
        cpu["  its patterns' scan"] += time.thread_time() - started
        calls["  its patterns' scan"] += 1
_scanner.Scanner.findings = findings_timed
callers(_redactor.Redactor, "learn_text", {{light: "long outputs' secrets (light digests)",
                                           _secrets.SessionSecrets._learn_stored.__code__: "  their scans"}},
        count_misses=True)
callers(_secrets.SessionSecrets, "read_ahead", {{_read_ahead.run_parts.__code__: "whole outputs' secrets"}})
callers(_redactor.Redactor, "redact_ahead",
        {{_compactor.warm_for_compaction.__code__: "redaction of what add() did not redact"}})
tokens = [0]
def added(cm, m):
    tokens[0] += cm.counter.count_message(m)
replay_loop(Path({data!r}), {sessions}, session_prefix="secrets", window={window}, on_added=added, collect=True)
print(json.dumps({{"tokens": tokens[0], "cpu": cpu, "calls": calls, "misses": misses}}))
"""


# The parts in the order printed (each indented one under the part that holds it).
_LABELS = ("joined check", "  its patterns' scan", "long outputs' secrets (light digests)", "whole outputs' secrets",
           "  their scans", "redaction of what add() did not redact")


def start(src: str, unscanned: bool, args: argparse.Namespace) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": compiled(src)}  # (bytecode as installed: bench/_bytecode.py)
    code = _CHILD.format(bench=str(Path(__file__).resolve().parent), unscanned=unscanned, data=str(args.data),
                         sessions=args.sessions, window=args.window)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def figures(child: subprocess.Popen[str]) -> dict[str, object]:
    out, err = child.communicate()
    if child.returncode != 0:
        raise SystemExit(err[-3000:])
    done: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=69, help="the first N lm32b sessions by id")
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--data", type=Path, default=DATA, help="the recorded lm32b sessions")
    args = parser.parse_args()
    variants = {"as is": False, "joined check unscanned": True}
    rounds: dict[str, list[dict[str, object]]] = {name: [] for name in variants}
    for _ in range(args.runs):
        children = {name: start(args.src, unscanned, args) for name, unscanned in variants.items()}
        for name, child in children.items():
            rounds[name].append(figures(child))
    for name, runs in rounds.items():
        def per_million(run: dict[str, object], label: str) -> float:
            spent: dict[str, float] = run["cpu"]  # type: ignore[assignment]
            tokens: int = run["tokens"]  # type: ignore[assignment]
            return spent.get(label, 0.0) * 1e9 / tokens

        first = runs[0]
        whole = [per_million(run, "read-ahead") for run in runs]
        print(f"{name}: read-ahead {statistics.median(whole):.0f} ms CPU per 1M tokens "
              f"({min(whole):.0f}-{max(whole):.0f}, {len(runs)} runs, {first['tokens']:,} tokens)")
        calls: dict[str, int] = first["calls"]  # type: ignore[assignment]
        misses: dict[str, int] = first["misses"]  # type: ignore[assignment]
        for label in _LABELS:
            if label not in calls:
                continue
            parts = [per_million(run, label) for run in runs]
            missed = f", {misses[label]:,} not in the scan cache" if label in misses else ""
            print(f"  {label:48s} {statistics.median(parts):6.1f}   ({calls[label]:,} calls{missed})")


if __name__ == "__main__":
    main()
