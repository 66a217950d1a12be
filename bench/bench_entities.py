"""Entity extraction and digest material: identical to another source tree, and what they cost per character.

Reads every message of the recorded sessions (``../shared/data/trajectories``: SWE-agent lm32b and Claude 4 Sonnet,
tau-bench airline): each message's text, each tool call's arguments, each tool output. For each, in a subprocess
per source tree, it computes what contextfold reads of a message:

- ``extract_entities_by_kind`` (the entities by kind, in order) and ``bare_numbers`` of each text;
- ``digest_material`` (a masked output's ranked digest candidates) of each text;
- ``read_message`` (what a summary's digest takes of each message: mentions, outcomes, requests, actions ...).

``--baseline SRC`` runs the same over another tree (e.g. the session's starting main) and reports every
difference (there must be none: the fast ways are the same functions). The figures are CPU time
(``time.process_time``) per character read, with the process-wide memos emptied before each session (as a fresh
process would start it), so that words a session shares with another do not count as read: ``cold`` is the first
reading of each session (each part read from nothing), ``again`` the same session read a second time with the text
memos emptied but what is kept by word (as a later output repeating the session's words is read). Trees alternate,
``--runs`` times; medians are shown.

Run: python bench/bench_entities.py [--baseline /tmp/base8/src] [--runs 3] [--sources lm32b,claude,tau]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"
SOURCES = {"lm32b": "sweagent-lm32b", "claude": "sweagent-claude4sonnet", "tau": "taubench-airline"}

_CHILD = r"""
import pickle, sys, time
from pathlib import Path
from contextfold.importers import load_sessions
from contextfold.summarize import digest, entities
from contextfold.cache import _digest

folders, out, check = {folders!r}, {out!r}, {check!r}

def forget(words_too):
    entities._cache.clear()
    entities._numbers_cache.clear()
    digest._readings.clear()
    digest._outcome_memo.clear()
    _digest._materials.clear()
    if words_too and hasattr(entities, "_unit_memo"):
        entities._unit_memo.clear()
        entities._unit_memo_bytes = 0

def reading(message):
    found = digest.read_message(message)
    return None if found is None else tuple(getattr(found, f) for f in found.__dataclass_fields__)

results = []
spent = {{"entities": [0.0, 0.0], "material": [0.0, 0.0], "reading": [0.0, 0.0]}}
chars = {{"entities": 0, "material": 0, "reading": 0}}
for folder in folders:
    for session in load_sessions(Path(folder)):
        texts = []
        for m in session.messages:
            texts.append(m.text)
            texts.extend(c.arguments for c in m.tool_calls)
        texts = [t for t in dict.fromkeys(texts) if t]
        for attempt in (0, 1):  # cold, then again with only the text memos emptied
            forget(words_too=attempt == 0)
            c0 = time.process_time()
            for t in texts:
                entities.extract_entities_by_kind(t)
                entities.bare_numbers(t)
            spent["entities"][attempt] += time.process_time() - c0
            forget(words_too=attempt == 0)
            c0 = time.process_time()
            for t in texts:
                _digest.digest_material(t)
            spent["material"][attempt] += time.process_time() - c0
            forget(words_too=attempt == 0)
            c0 = time.process_time()
            for m in session.messages:
                digest.read_message(m)
            spent["reading"][attempt] += time.process_time() - c0
        chars["entities"] += sum(map(len, texts))
        chars["material"] += sum(len(_digest.digest_source(t)[0]) for t in texts)
        chars["reading"] += sum(len(m.text) + sum(len(c.arguments) for c in m.tool_calls) for m in session.messages)
        if check:
            for t in texts:
                results.append(("entities", t, entities.extract_entities_by_kind(t), entities.bare_numbers(t)))
                results.append(("material", t, tuple(_digest.digest_material(t))))
            for m in session.messages:
                results.append(("reading", m.text, reading(m)))
with open(out, "wb") as f:
    pickle.dump({{"results": results, "spent": spent, "chars": chars}}, f)
"""


def run(src: str, folders: list[str], check: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "out.pickle")
        code = _CHILD.format(folders=folders, out=out, check=check)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": src})
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        with open(out, "rb") as f:
            loaded: dict[str, object] = pickle.load(f)
    return loaded


def _ns_per_char(figures: dict[str, object], part: str, attempt: int) -> float:
    spent = figures["spent"]
    chars = figures["chars"]
    assert isinstance(spent, dict) and isinstance(chars, dict)
    return float(spent[part][attempt]) * 1e9 / max(1, int(chars[part]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--sources", default="lm32b,claude,tau")
    args = parser.parse_args()
    folders = [str(DATA / SOURCES[name]) for name in args.sources.split(",")]
    here = str(Path(__file__).resolve().parents[1] / "src")
    trees = [("this tree", here)] + ([("baseline", args.baseline)] if args.baseline else [])
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; sources: {args.sources}")
    figures: dict[str, list[dict[str, object]]] = {label: [] for label, _ in trees}
    for run_index in range(args.runs):
        for label, src in trees:
            figures[label].append(run(src, folders, check=run_index == 0 and args.baseline is not None))
    if args.baseline:
        mine, theirs = figures["this tree"][0]["results"], figures["baseline"][0]["results"]
        assert isinstance(mine, list) and isinstance(theirs, list)
        differences = [a for a, b in zip(mine, theirs, strict=True) if a != b]
        by_part: dict[str, int] = {}
        for row in mine:
            by_part[row[0]] = by_part.get(row[0], 0) + 1
        print(f"compared: {', '.join(f'{n} {part}' for part, n in by_part.items())}; "
              f"differences: {len(differences)}")
        for row in differences[:5]:
            print("  differs:", row[0], repr(row[1][:120]))
        digest_of = hashlib.sha256(pickle.dumps(mine)).hexdigest()[:16]
        print(f"results digest (this tree): {digest_of}")
    print(f"{'tree':<10} | {'part':<9} | {'ns/char cold':>12} | {'ns/char again':>13}")
    for label, found in figures.items():
        for part in ("entities", "material", "reading"):
            cold = statistics.median(_ns_per_char(f, part, 0) for f in found)
            again = statistics.median(_ns_per_char(f, part, 1) for f in found)
            print(f"{label:<10} | {part:<9} | {cold:>12.1f} | {again:>13.1f}")
    print(json.dumps({label: {part: round(statistics.median(_ns_per_char(f, part, 0) for f in found), 1)
                              for part in ("entities", "material", "reading")} for label, found in figures.items()}))


if __name__ == "__main__":
    main()
