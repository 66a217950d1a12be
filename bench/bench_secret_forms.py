"""What remembering a secret's forms costs: the memory's capacity, the time to redact real outputs, false positives.

Figures per tree (each in a fresh interpreter, alternating run by run; ``--base SRC``: another tree in the same run),
medians of ``--runs``:

- ``strings_aws`` / ``strings_pw``: strings one AWS-style 40-character key / one 16-character punctuated password
  brings into the memory; ``capacity_aws``: how many distinct such keys the memory (16,384 strings) holds.
- ``cold_ms`` / ``warm_ms``: CPU to redact ``--texts`` real message texts of the shared SWE-agent sessions with
  ``--secrets`` remembered values (none of them in the texts), first time (nothing cached) and again;
  ``none_ms``: the same first pass with nothing remembered (most sessions).
- ``changed``: texts the redaction changed with the secrets remembered minus with none: false positives of the
  memory (its forms and its views), since no remembered value is in the texts.

Nothing here asserts on time. Run: python bench/bench_secret_forms.py [--base /tmp/base19/src] [--runs 5]
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

HERE = Path(__file__).resolve().parent

_RUN = r"""
import json, random, string, sys, time
from pathlib import Path
from contextfold.redact import Redactor
from contextfold.redact.memory import SecretMemory, forms

limit, secrets = int(sys.argv[1]), int(sys.argv[2])
texts = []
for path in sorted(Path("/work/shared/data/trajectories").glob("sweagent-*/*.traj")):
    for message in json.loads(path.read_text(encoding="utf-8")).get("history", []):
        content = message.get("content")
        for text in [content] if isinstance(content, str) else [b.get("text", "") for b in content or []]:
            if text:
                texts.append(text)
    if len(texts) >= limit:
        break
texts = texts[:limit]
rng = random.Random(7)
alphabet = string.ascii_letters + string.digits
def aws(i):
    return "".join(rng.choice(alphabet + "/+") for _ in range(40))
def password(i):
    return "".join(rng.choice(alphabet + "!#$%&*+/=?@^~") for _ in range(16))
values = [aws(i) if i % 2 else password(i) for i in range(secrets)]

def redact(redactor):
    c0 = time.process_time()
    out = [redactor.redact_text(t) for t in texts]
    return (time.process_time() - c0) * 1000, sum(a != b for a, b in zip(out, texts))

plain = Redactor()
none_ms, changed_none = redact(plain)
r = Redactor()
for v in values:
    r.learn(v, "password")
cold_ms, changed = redact(r)
warm_ms, _ = redact(r)
memory = SecretMemory()
n = 0
while True:
    before = len(memory)
    memory.learn(aws(n), "aws_secret")
    if len(memory) == before:
        break
    n += 1
print(json.dumps({"texts": len(texts), "chars_m": sum(map(len, texts)) / 1e6,
                  "strings_aws": len(forms(aws(0))), "strings_pw": len(forms(password(0))), "capacity_aws": n,
                  "none_ms": none_ms, "cold_ms": cold_ms, "warm_ms": warm_ms, "changed": changed - changed_none}))
"""


def _run(src: str, texts: int, secrets: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": compiled(src)}  # (bytecode as installed: bench/_bytecode.py)
    out = subprocess.run([sys.executable, "-c", _RUN, str(texts), str(secrets)], env=env, capture_output=True,
                         text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=None, help="another src directory, measured in the same run")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--texts", type=int, default=3_000)
    parser.add_argument("--secrets", type=int, default=20)
    args = parser.parse_args()
    trees = [("this tree", str(HERE.parent / "src"))] + ([("base", args.base)] if args.base else [])
    figures: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for run in range(args.runs):
        for name, src in trees if run % 2 == 0 else trees[::-1]:
            result = _run(src, args.texts, args.secrets)
            figures[name].append(result)
            print(f"run {run + 1} | {name} | {json.dumps(result)} | load {os.getloadavg()[0]:.1f}")
    for name, results in figures.items():
        medians = {k: statistics.median(r[k] for r in results) for k in results[0]}
        print(f"{name:9} | " + ", ".join(f"{k} {v:.4g}" for k, v in medians.items()))
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
