"""Agent-facing context (issue 24) measured in replay: superseded reads, compaction receipts, the budget line.

Each variant replays the shared sessions (SWE-agent LM-32B and Claude Sonnet 4 at 16K, tau-bench airline at 4K)
through the manager and reports what the model would have had in view (needed-fact and number recall), what was
sent (tokens, and tokens against sending the raw history), and the bill with prompt caching
(:mod:`contextfold.billing`: each reference provider's cache — OpenAI's automatic prefix cache, Anthropic's
breakpoints — over the unmanaged history's bill with caching, and the USD of the input at that provider's prices).
The variants differ in policy only:

- ``baseline``: superseded reads off, no receipts, no budget line (contextfold before issue 24).
Bills are relative to the unmanaged history's bill with caching (1.0 = sending the whole history, cached).

- ``superseded reads``: masking takes stale reads first (file tools' default rules; on tau-bench, the
  reservation/user rules below as well).
- ``+ receipts``: the compaction receipt after each summary (the library default).
- ``+ budget line (changes)`` / ``+ budget line (always)``: the one-line context status, sent last.

Recorded sessions replay what the model did without any of this, so the budget line can only cost here (its tokens,
earlier compaction); what a model does with it needs a live model. Figures go to stdout as a Markdown table.

    PYTHONPATH=src python bench/bench_steering.py [--sources lm32b,claude,tau] [--jobs 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from contextfold.importers._files import load_sessions
from contextfold.replay.harness import ReplayOptions
from contextfold.replay.runner import run_replay

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
SOURCES = {
    "lm32b": ("sweagent-lm32b", 16_000),
    "claude": ("sweagent-claude4sonnet", 16_000),
    "tau": ("taubench-airline/gpt-4o-airline.json", 4_000),
}
# tau-bench's tools read and change reservations and users by id: what counts as the same resource there.
TAU_RESOURCES: dict[str, Any] = {
    "get_reservation_details": {"resource": {"key": "reservation_id"}},
    "update_reservation_*": {"resource": {"key": "reservation_id", "access": "edit"}},
    "cancel_reservation": {"resource": {"key": "reservation_id", "access": "edit"}},
    "get_user_details": {"resource": {"key": "user_id"}},
    "book_reservation": {"resource": {"key": "user_id", "access": "edit"}},
    "send_certificate": {"resource": {"key": "user_id", "access": "edit"}},
}
OFF = {"superseded_reads": False, "compaction_receipt": False, "context_status": "off"}
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("baseline", OFF),
    ("superseded reads", {**OFF, "superseded_reads": True}),
    ("+ receipts (default)", {**OFF, "superseded_reads": True, "compaction_receipt": True}),
    ("+ budget line (changes)", {"superseded_reads": True, "compaction_receipt": True, "context_status": "changes"}),
    ("+ budget line (always)", {"superseded_reads": True, "compaction_receipt": True, "context_status": "always"}),
]


def row(name: str, variant: str, policy: dict[str, Any], jobs: int) -> dict[str, Any]:
    path, window = SOURCES[name]
    if name == "tau" and policy.get("superseded_reads"):
        policy = {**policy, "tools": TAU_RESOURCES}
    sessions = load_sessions(DATA / path)
    started = time.perf_counter()
    d = run_replay(sessions, ReplayOptions(window=window, policy=policy), jobs=jobs)
    elapsed = time.perf_counter() - started
    print(f"  {name} {variant}: {elapsed:.0f} s", file=sys.stderr)
    bill = d.get("bill") or {}
    openai, anthropic = bill.get("openai") or {}, bill.get("anthropic") or {}
    return {
        "source": name, "window": window, "variant": variant,
        "recall": d["needed_fact_recall"], "number_recall": d["number_recall"],
        "recoverable": d["recoverable_fact_recall"], "answered": d["answered_message_in_view"],
        "tokens": d["tokens_sent"], "tokens_vs_raw": d["tokens_sent"] / d["tokens_sent_baseline"],
        "bill_openai": openai.get("ratio"), "usd_openai": (openai.get("view") or {}).get("usd"),
        "bill_anthropic": anthropic.get("ratio"), "usd_anthropic": (anthropic.get("view") or {}).get("usd"),
        "compactions": d["compactions"], "maskings": d["maskings"], "valid": d["valid_rate"],
    }


def _bill(ratio: float | None, usd: float | None) -> str:
    """The bill as a share of the unmanaged history's bill with caching, and its USD."""
    if ratio is None:
        return "—"
    return f"{ratio:.4f} (${usd:,.2f})" if usd is not None else f"{ratio:.4f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.2f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", default="lm32b,claude,tau")
    parser.add_argument("--variants", default=None, help="comma-separated variant numbers (0-based); all by default")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    chosen = [VARIANTS[int(i)] for i in args.variants.split(",")] if args.variants else VARIANTS
    rows = [row(name, variant, dict(policy), args.jobs)
            for name in args.sources.split(",") for variant, policy in chosen]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("| sessions | variant | recall | number recall | recoverable | tokens sent | vs raw | bill with caching, "
          "OpenAI | bill with caching, Anthropic | compactions | maskings |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['source']} @ {r['window'] // 1000}K | {r['variant']} | {_pct(r['recall'])} | "
              f"{_pct(r['number_recall'])} | {_pct(r['recoverable'])} | {r['tokens']:,} | {r['tokens_vs_raw']:.3f}× | "
              f"{_bill(r['bill_openai'], r['usd_openai'])} | {_bill(r['bill_anthropic'], r['usd_anthropic'])} | "
              f"{r['compactions']} | {r['maskings']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
