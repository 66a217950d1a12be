"""Where the bill with prompt caching goes, and what bounds it (issue 25).

For each shared set and each provider (OpenAI's rates: gpt-4o; Anthropic's: Claude Sonnet 4), contextfold runs with
its policy priced for that provider (``Policy(cache_pricing=...)``, the default being the manager's model, gpt-4o)
and every view is billed with ``contextfold.billing``. Printed, relative to the unmanaged history's bill *with*
caching:

- the bill and the recall;
- where it goes: the calls that only append to the previous request, and the calls that rewrote it, by cause
  (masking, compaction, the answered output put back after a wider view), with the cache they lost: the tokens the
  previous request had in the cache that this one could not read, times the price of not reading them (fresh at
  OpenAI, written at Anthropic) less the read price;
- floors that no approach sending the pinned head (system prompt) can beat: the pinned head and the latest message
  alone in every call (a view no agent can work with), and the unmanaged history unchanged while it is under the
  soft threshold, then that floor;
- with ``--sweep``: the soft threshold lowered (``soft_pct`` 0.45, 0.3) at OpenAI's rates, where acting earlier
  pays: bill and recall;
- with ``--oracle-horizon``: the ceiling of a better estimate of how long a session will last. The cache-aware
  decisions (``billing.economics.weigh_rewrite``) expect a session to last as many calls again as it has had; here
  each session is replayed with the decisions handed the number of calls it really has left (foresight), at each
  provider's rates with the policy priced for it: bill and recall beside the default's;
- with ``--frontier``: the recall-bill frontier of the policy's knobs, at each provider's rates with the policy priced
  for it: every combination of the soft threshold (``soft_pct``), a tool-output budget (none, or a quarter of the
  hard threshold), and the masking batch (``clear_at_least`` 2,000 and 4 pairs kept, or 500 and 2), its recall and
  bill, the points no other combination beats on both marked, and the cheapest at the issue's table recall. What an
  oracle could do at all is ``bench_bill_bound.py``.

    PYTHONPATH=src python bench/bench_bill.py [--sources lm32b,tau,claude] [--jobs N] [--sweep] [--frontier]
        [--oracle-horizon]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contextfold.billing import REFERENCE_MODELS, Bill, SessionMeter, blocks_of, cache_rates
from contextfold.compaction import Policy
from contextfold.importers._files import load_sessions
from contextfold.importers._session import RecordedSession
from contextfold.messages import Message
from contextfold.replay import ReplayOptions, run_replay
from contextfold.tokens import MessageCounter, TiktokenCounter

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
SOURCES = {
    "lm32b": ("sweagent-lm32b", 16_000),
    "claude": ("sweagent-claude4sonnet", 16_000),
    "tau": ("taubench-airline/gpt-4o-airline.json", 4_000),
}
# The bars: the bill with caching against the unmanaged history's, per provider.
BARS = {"openai": 0.60, "anthropic": 0.80}
# A call that reads this many fewer tokens than the previous request held lost its cache (smaller differences are
# rounding: OpenAI reads in steps of 128 tokens).
LOST_AT_LEAST = 200
SWEEP_SOFT_PCT = (0.45, 0.3)
# The table: the recall (project's metric) a policy must not fall below, per set.
TABLE_RECALL = {"lm32b": 0.972, "claude": 0.992, "tau": 0.934}
FRONTIER_SOFT_PCT = (0.6, 0.45, 0.3, 0.2)
FRONTIER_BATCHES = ((2_000, 4), (500, 2))  # (clear_at_least, keep_tool_io_pairs)


def where(result: Mapping[str, Any], provider: str) -> dict[str, tuple[int, float]]:
    """Per cause of a rewrite: (calls, units of cache lost); plus the calls that only appended."""
    rates = cache_rates(REFERENCE_MODELS[provider])
    unread = rates.write_ratio if rates.scheme == "breakpoints" else 1.0
    out = {"append": (0, 0.0), "masking": (0, 0.0), "compaction": (0, 0.0), "wider output put back": (0, 0.0)}
    for session in result["per_session"]:
        previous: Mapping[str, Any] | None = None
        for t in session["series"]:
            bill = (t.get("bill") or {}).get(provider)
            if bill is None:
                continue
            lost = previous["view_tokens"] - bill["read"] if previous is not None else 0
            if previous is None or lost < LOST_AT_LEAST:
                cause = "append"
            elif t["compactions"] > previous["compactions"]:
                cause = "compaction"
            elif t["maskings"] > previous["maskings"]:
                cause = "masking"
            else:
                cause = "wider output put back"
            calls, units = out[cause]
            out[cause] = (calls + 1, units + (max(0, lost) * (unread - rates.read_ratio) if cause != "append" else 0))
            previous = t
    return out


def floors(sessions: Sequence[RecordedSession], window: int) -> dict[str, dict[str, float]]:
    """The two floors' bills over the unmanaged history's, per provider (see the module docstring)."""
    counter = MessageCounter(TiktokenCounter("o200k_base"))
    soft = Policy().budgets(window).soft
    totals = {k: {p: Bill() for p in REFERENCE_MODELS} for k in ("unmanaged", "head+latest", "unchanged under soft")}
    for s in sessions:
        meters = {k: SessionMeter() for k in totals}
        crossed = False
        for i, m in enumerate(s.messages):
            if m.role != "assistant" or not i:
                continue
            history = list(s.messages[:i])
            head = [x for x in history[:1] if x.role == "system"]
            floor: list[Message] = head + [x for x in history[-1:] if x not in head]
            crossed = crossed or counter.count_messages(history) > soft
            meters["unmanaged"].request(blocks_of(history, counter.count_message))
            meters["head+latest"].request(blocks_of(floor, counter.count_message))
            meters["unchanged under soft"].request(blocks_of(floor if crossed else history, counter.count_message))
        for name, meter in meters.items():
            for provider, bill in meter.bills.items():
                totals[name][provider].merge(bill)
    return {name: {p: totals[name][p].units / totals["unmanaged"][p].units for p in REFERENCE_MODELS}
            for name in ("head+latest", "unchanged under soft")}


def replay(sessions: Sequence[RecordedSession], window: int, policy: Policy, jobs: int) -> dict[str, Any]:
    return run_replay(sessions, ReplayOptions(window=window, policy=policy.model_dump(mode="json")), jobs=jobs)


def frontier(name: str, sessions: Sequence[RecordedSession], window: int, jobs: int) -> None:
    """The knobs' recall-bill frontier at each provider's rates (see the module docstring)."""
    hard = Policy().budgets(window).hard
    for provider, model in REFERENCE_MODELS.items():
        rows: list[tuple[str, float, float]] = []
        for soft_pct in FRONTIER_SOFT_PCT:
            for budget in (None, hard // 4):
                for clear, keep in FRONTIER_BATCHES:
                    knobs: dict[str, Any] = {"soft_pct": soft_pct, "tool_output_budget_tokens": budget,
                                             "clear_at_least": clear, "keep_tool_io_pairs": keep}
                    result = replay(sessions, window, Policy(cache_pricing=model, **knobs), jobs)
                    label = ", ".join(f"{k} {v}" for k, v in knobs.items())
                    rows.append((label, result["needed_fact_recall"], result["bill"][provider]["ratio"]))
        print(f"\n{name}, {provider} rates (bar {BARS[provider]}; table recall {100 * TABLE_RECALL[name]:.1f}%):\n")
        print("| knobs | recall | bill | on the frontier |\n|---|---|---|---|")
        for label, recall, bill in sorted(rows, key=lambda r: r[2]):
            beaten = any(r >= recall and b <= bill and (r, b) != (recall, bill) for _l, r, b in rows)
            print(f"| {label} | {100 * recall:.2f}% | {bill:.3f} | {'' if beaten else 'yes'} |")
        fitting = [b for _l, r, b in rows if r >= TABLE_RECALL[name]]
        print(f"\nCheapest at the table's recall: {min(fitting):.3f}" if fitting else "\nNone at the table's recall")


def calls_of(session: RecordedSession) -> int:
    """The model calls a replay of ``session`` makes (one per recorded answer after the first message)."""
    return sum(1 for i, m in enumerate(session.messages) if m.role == "assistant" and i)


def oracle_horizon(name: str, sessions: Sequence[RecordedSession], window: int) -> None:
    """Each session replayed with the decisions told how many calls it has left (see the module docstring)."""
    from dataclasses import replace

    import contextfold.billing.economics as economics

    weigh = economics.weigh_rewrite
    left: dict[str, int] = {"calls": 0}

    def foreseen(rates: Any, case: economics.RewriteCase) -> economics.RewriteVerdict:
        # weigh_rewrite expects as many calls again as turns_so_far: hand it the calls the session really has left.
        return weigh(rates, replace(case, turns_so_far=max(0, left["calls"] - case.turns_so_far)))

    print(f"\n{name}: the cache-aware decisions told how many calls each session has left (foresight):\n")
    print("| rates (policy priced for) | recall, default → foreseen length | bill, default → foreseen length |")
    print("|---|---|---|")
    for provider, model in REFERENCE_MODELS.items():
        cells = []
        for oracle in (False, True):
            units = reference = 0.0
            found = needed = 0
            economics.weigh_rewrite = foreseen if oracle else weigh
            try:
                for session in sessions:
                    left["calls"] = calls_of(session)
                    result = replay([session], window, Policy(cache_pricing=model), 1)
                    units += result["bill"][provider]["view"]["units"]
                    reference += result["bill"][provider]["unmanaged"]["units"]
                    for t in result["per_session"][0]["series"]:
                        found += t["in_view"]
                        needed += t["needed"]
            finally:
                economics.weigh_rewrite = weigh
            cells.append((found / max(needed, 1), units / reference))
        (r0, b0), (r1, b1) = cells
        print(f"| {provider} ({model}) | {100 * r0:.2f}% → {100 * r1:.2f}% | {b0:.3f} → {b1:.3f} |")


def report(name: str, jobs: int, sweep: bool, with_frontier: bool = False, with_oracle: bool = False) -> None:
    path, window = SOURCES[name]
    sessions = load_sessions(DATA / path)
    started = time.perf_counter()
    print(f"\n### {name} @ {window // 1000}K ({len(sessions)} sessions)\n")
    print("| rates (policy priced for) | recall | tokens | cache hits | bill (bar) | append calls | masking: calls, "
          "cache lost | compaction: calls, cache lost | wider output put back: calls, cache lost |")
    print("|---|---|---|---|---|---|---|---|---|")
    for provider, model in REFERENCE_MODELS.items():
        result = replay(sessions, window, Policy(cache_pricing=model), jobs)
        bill = result["bill"][provider]
        spent = where(result, provider)
        reference = bill["unmanaged"]["units"]
        met = "met" if bill["ratio"] <= BARS[provider] else "not met"
        cells = [f"{c} calls, {u / reference:.3f}" for c, u in
                 (spent["masking"], spent["compaction"], spent["wider output put back"])]
        print(f"| {provider} ({model}) | {100 * result['needed_fact_recall']:.2f}% | "
              f"{result['tokens_sent'] / result['tokens_sent_baseline']:.3f}× | {100 * bill['hit_share']:.1f}% | "
              f"{bill['ratio']:.3f} (≤ {BARS[provider]}: {met}) | {spent['append'][0]} | {' | '.join(cells)} |")
    bounds = floors(sessions, window)
    print("\nFloors (bill over the unmanaged history's, OpenAI / Anthropic rates): "
          + "; ".join(f"{k}: {v['openai']:.3f} / {v['anthropic']:.3f}" for k, v in bounds.items()))
    if sweep:
        print("\n| soft_pct (OpenAI-priced) | recall | tokens | bill, OpenAI rates |\n|---|---|---|---|")
        for pct in SWEEP_SOFT_PCT:
            result = replay(sessions, window, Policy(soft_pct=pct), jobs)
            print(f"| {pct} | {100 * result['needed_fact_recall']:.2f}% | "
                  f"{result['tokens_sent'] / result['tokens_sent_baseline']:.3f}× | "
                  f"{result['bill']['openai']['ratio']:.3f} |")
    if with_frontier:
        frontier(name, sessions, window, jobs)
    if with_oracle:
        oracle_horizon(name, sessions, window)
    print(f"  {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", default="lm32b,claude,tau")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--sweep", action="store_true", help="also lower the soft threshold at OpenAI's rates")
    parser.add_argument("--frontier", action="store_true", help="also sweep the policy's knobs at both rates")
    parser.add_argument("--oracle-horizon", action="store_true",
                        help="also replay with the decisions told each session's remaining calls (foresight)")
    args = parser.parse_args()
    for name in args.sources.split(","):
        report(name, args.jobs, args.sweep, args.frontier, args.oracle_horizon)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
