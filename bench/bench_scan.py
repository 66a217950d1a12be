"""The secret scan over every text of the shared sessions: CPU ns per character, and its findings against another tree.

Issue 22: the scan (``contextfold.redact._scanner.Scanner.scan``: every pattern's findings in one text, before anything
learned is applied) cost ~120 ns a character, ~420 ms per million tokens by itself, against a read-ahead bar of 150 ms.
Every message text and tool-call argument string of the recorded sessions (``/work/shared/data/trajectories``, all three
sets), and every text of the secrets corpora (``tests/redact_corpus.py``), is scanned once per run, each tree in its own
interpreter, the trees alternating run by run (the same load of the moment). Figures are CPU time
(``time.process_time``), medians of the runs; texts over 200 characters (tool outputs, files) and shorter ones (digest
items, ids, arguments) are given apart, as their costs differ (per character, per text); "runs" are five texts of 1M
characters repeating one or two (``'A' * 1_000_000``, base64 of zeros: a word repeating itself would occur at every
position, issue 22), not in "all". With
``--baseline``, the findings of every text are compared with the baseline's: the number that differ must be 0.

Run: python bench/bench_scan.py [--baseline /tmp/base8/src] [--runs 5] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"

_CHILD = r"""
import pickle, sys, time
from contextfold.redact import Redactor
texts = pickle.load(open(sys.argv[1], "rb"))
# Texts of one repeated character (base64 of zeros, a line of dashes): a match per character for a word repeating it.
RUNS = ["A" * 1_000_000, "a" * 1_000_000, "0" * 1_000_000, "-" * 1_000_000, "ab" * 500_000]
redactor = Redactor()
redactor.patterns  # (compiled before timing)
# (the scan of one text: Scanner.scan since the sixteenth session, Redactor._scan before)
scan = redactor._scanner.scan if hasattr(redactor, "_scanner") else redactor._scan
times = {}
found = []
for group, chosen in (("long", [t for t in texts if len(t) > 200]), ("short", [t for t in texts if len(t) <= 200]),
                      ("runs", RUNS)):
    c0 = time.process_time()
    out = [scan(t) for t in chosen]
    times[group] = (time.process_time() - c0, sum(map(len, chosen)), len(chosen))
    found += [(t, [(f.start, f.end, f.name) for f in fs]) for t, fs in zip(chosen, out)]
pickle.dump({"times": times, "found": dict(found)}, open(sys.argv[2], "wb"))
"""


def _texts(data: Path) -> list[str]:
    from contextfold.importers import load_sessions

    # The secrets corpora too (tests/redact_corpus.py): the shared sessions hold few secrets.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from redact_corpus import CODE, SECRETS

    texts: dict[str, None] = {item.text: None for item in (*SECRETS, *CODE)}
    for folder in sorted(p for p in data.iterdir() if p.is_dir()):
        for session in load_sessions(folder):
            for m in session.messages:
                if m.text:
                    texts[m.text] = None
                for call in m.tool_calls:
                    texts[call.arguments] = None
    return list(texts)


def _run(src: str, corpus: Path, out: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(corpus), str(out)], capture_output=True, text=True,
                          env=env)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    with out.open("rb") as f:
        result: dict[str, object] = pickle.load(f)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=None, help="another tree's src directory, measured alternately")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DATA, help="the recorded sessions (a folder of sets)")
    args = parser.parse_args()
    if not args.data.is_dir():
        parser.error(f"--data: no directory {args.data} (give the shared trajectories)")
    here = str(Path(__file__).resolve().parents[1] / "src")
    trees = [("this tree", here)] + ([("baseline", args.baseline)] if args.baseline else [])
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "texts.pkl"
        texts = _texts(args.data)
        with corpus.open("wb") as f:
            pickle.dump(texts, f)
        results: dict[str, list[dict[str, object]]] = {label: [] for label, _ in trees}
        loads = []
        for _ in range(args.runs):
            for label, src in trees:
                loads.append(os.getloadavg()[0])
                results[label].append(_run(src, corpus, Path(tmp) / "out.pkl"))
    print(f"{len(texts)} distinct texts, {sum(map(len, texts)) / 1e6:.1f}M characters, {args.runs} runs; "
          f"load average (1 min): {min(loads):.1f}-{max(loads):.1f}")
    print(f"{'tree':<10} | {'texts':<6} | {'count':>6} | {'chars':>10} | {'ns/char (median, min-max)':<26} | "
          f"{'us/text':>8}")
    for label, runs in results.items():
        for group in ("long", "short", "all", "runs"):
            per_run = []
            for r in runs:
                times: dict[str, tuple[float, int, int]] = r["times"]  # type: ignore[assignment]
                parts = [times[g] for g in ("long", "short")] if group == "all" else [times[group]]
                per_run.append((sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts)))
            ns = [cpu * 1e9 / max(chars, 1) for cpu, chars, _ in per_run]
            us = statistics.median(cpu * 1e6 / max(count, 1) for cpu, _, count in per_run)
            _, chars, count = per_run[0]
            print(f"{label:<10} | {group:<6} | {count:>6} | {chars:>10} | {statistics.median(ns):>6.1f} "
                  f"({min(ns):.1f}-{max(ns):.1f}){'':<8} | {us:>8.1f}")
    if args.baseline:
        ours: dict[str, object] = results["this tree"][-1]["found"]  # type: ignore[assignment]
        theirs: dict[str, object] = results["baseline"][-1]["found"]  # type: ignore[assignment]
        differ = [t for t in ours if ours[t] != theirs.get(t)]
        with_findings = sum(1 for t in theirs if theirs[t])
        print(f"findings: {len(differ)} of {len(ours)} texts differ from the baseline's "
              f"({with_findings} texts hold a finding there)")
        for text in differ[:5]:
            print(f"  differs: {text[:120]!r}: {ours[text]} against {theirs.get(text)}")


if __name__ == "__main__":
    main()
