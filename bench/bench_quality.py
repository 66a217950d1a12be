"""Context quality side by side: contextfold against peer approaches, scored with one metric on the shared sessions.

Every approach sees the same recorded sessions turn by turn and builds the view the model would have received; each
view is scored by what the assistant turn then uses (paths, identifiers, quoted strings, alphanumeric codes and
bare numbers of 3+ digits, whole-word matches; ``contextfold.replay.metrics``), whether the answered message is in
it (``contextfold.answered``), and on tau-bench whether the policy and every user message are. Peers run with
their real code where it is installed:

- ``sliding``: drop the oldest units (a call with its results, or one message) until the view fits.
- ``langchain-human`` / ``langchain-human-ai``: LangChain's ``trim_messages`` (strategy "last", system kept,
  ``start_on="human"`` or ``("human", "ai")``).
- ``agents-trimmer``: openai-agents' ``ToolOutputTrimmer`` (defaults) on the Responses items, then sliding.
- ``masking-6``: observation masking keeping the last 6 tool outputs, then sliding.

Rows are at the same window (peers fill up to contextfold's hard threshold) and at equal tokens (each peer's
budget bisected until it sends as many tokens as contextfold's default policy), beside the unmanaged history (every
message so far; it overflows the window at the share of turns shown, so it is a reference, not an option).
``--answered`` instead checks the answered-message guarantee exhaustively: every session at 4K, 8K and 16K.
``--digests full,light,off`` instead compares contextfold's masked outputs' digests (issue 22): the default policy
with each kind of digest (``policy.mask_digest``) or none (``mask_digest_tokens=0``), at the same window and at
equal tokens (the window searched until the variant sends as many tokens as the full digest), with the spread over
sessions of each variant's recall against the full digest's (a paired bootstrap: the replay is deterministic, the
sessions are the sample).

Every view is billed with prompt caching counted (``contextfold.billing``: OpenAI's automatic prefix cache at gpt-4o's
rates, Anthropic's breakpoints at Claude Sonnet 4's, calls 30 s apart). Bills are relative to the unmanaged history's
bill *with* caching: "bill" is the approach with caching, "w/o cache" the same views with every token fresh.

    PYTHONPATH=src python bench/bench_quality.py [--sources lm32b,tau,claude] [--answered] [--digests full,off]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from contextfold.answered import answered_in_view
from contextfold.billing import REFERENCE_MODELS, Bill, SessionMeter, blocks_of, reference_rates
from contextfold.compaction import Policy
from contextfold.compaction._partition import build_units
from contextfold.formats import get_format
from contextfold.importers._files import load_sessions
from contextfold.importers._session import RecordedSession
from contextfold.messages import Message
from contextfold.replay.harness import ReplayOptions, replay_session
from contextfold.replay.metrics import (
    aggregate,
    bill_summary,
    contains_fact,
    is_number_fact,
    message_search_text,
    turn_entities,
)
from contextfold.tokens import MessageCounter, TiktokenCounter

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
SOURCES = {
    "lm32b": ("sweagent-lm32b", 16_000),
    "tau": ("taubench-airline/gpt-4o-airline.json", 4_000),
    "claude": ("sweagent-claude4sonnet", 16_000),
}
MASK_KEEP = 6
EQUAL_TOKENS_TOLERANCE = 0.02

View = Callable[[list[Message], int], list[Message]]


# -- scoring ----------------------------------------------------------------------------------------------------------
@dataclass
class Score:
    turns: int = 0
    valid: int = 0
    needed: int = 0
    in_view: int = 0
    numbers: int = 0
    numbers_in: int = 0
    answered: int = 0
    answered_in: int = 0
    policy: int = 0
    policy_in: int = 0
    users: int = 0
    users_in: int = 0
    tokens: int = 0
    baseline: int = 0
    over_window: int = 0
    bills: dict[str, Bill] = field(default_factory=dict)
    unmanaged: dict[str, Bill] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        def r(a: int, b: int) -> float | None:
            return round(a / b, 4) if b else None

        return {
            "recall": r(self.in_view, self.needed), "number_recall": r(self.numbers_in, self.numbers),
            "non_number_recall": r(self.in_view - self.numbers_in, self.needed - self.numbers),
            "answered_in_view": r(self.answered_in, self.answered), "policy_in_view": r(self.policy_in, self.policy),
            "user_messages_in_view": r(self.users_in, self.users), "valid": r(self.valid, self.turns),
            "tokens_vs_unmanaged": r(self.tokens, self.baseline), "tokens": self.tokens,
            "over_window": r(self.over_window, self.turns), "bill": bill_summary(self.bills, self.unmanaged),
        }


class Scorer:
    """Scores a view function over sessions; per-message facts and token counts are computed once."""

    def __init__(self, sessions: Sequence[RecordedSession]) -> None:
        self.sessions = sessions
        self.counter = MessageCounter(TiktokenCounter("o200k_base"))
        self._facts = [[turn_entities(m) for m in s.messages] for s in sessions]

    def run(self, view_fn: View, budget: int, window: int | None = None) -> Score:
        score = Score()
        count = self.counter.count_message
        for s, facts in zip(self.sessions, self._facts, strict=True):
            meter, unmanaged = SessionMeter(reference_rates()), SessionMeter(reference_rates())
            wire = get_format(s.format)
            seen: set[str] = set()
            tau = s.source == "tau_bench"
            policy_text = next((m.text for m in s.messages if m.role == "system"), "") if tau else ""
            raw = 0
            billed = 0  # messages of the unmanaged history already billed: it only grows (SessionMeter.extend)
            for index, message in enumerate(s.messages):
                if message.role == "assistant" and index:
                    history = list(s.messages[:index])
                    view = view_fn(history, budget)
                    score.turns += 1
                    try:
                        wire.validate(wire.encode(view))
                        score.valid += 1
                    except Exception:
                        pass
                    sent = self.counter.count_messages(view)
                    score.tokens += sent
                    score.baseline += raw
                    score.over_window += window is not None and sent > window
                    meter.request(blocks_of(view, count))
                    added = blocks_of(history, count)[billed:] if not billed else [
                        replace(b, pinned=False) for b in blocks_of(history[billed:], count)]
                    unmanaged.extend(added)
                    billed = index
                    text = "\n".join(message_search_text(m) for m in view)
                    needed = [f for f in facts[index] if f in seen]
                    present = [f for f in needed if contains_fact(text, f)]
                    score.needed += len(needed)
                    score.in_view += len(present)
                    score.numbers += sum(1 for f in needed if is_number_fact(f))
                    score.numbers_in += sum(1 for f in present if is_number_fact(f))
                    if any(m.role in ("user", "tool") for m in history):
                        score.answered += 1
                        score.answered_in += answered_in_view(history, view)
                    if tau:
                        score.policy += 1
                        score.policy_in += bool(policy_text) and policy_text in text
                        users = [m.text for m in history if m.role == "user" and m.text]
                        score.users += len(users)
                        score.users_in += sum(1 for u in users if u in text)
                seen |= facts[index]
                raw += self.counter.count_message(message)
            for name, bill in meter.bills.items():
                score.bills.setdefault(name, Bill()).merge(bill)
            for name, bill in unmanaged.bills.items():
                score.unmanaged.setdefault(name, Bill()).merge(bill)
        return score


# -- peers ------------------------------------------------------------------------------------------------------------
def sliding(counter: MessageCounter) -> View:
    def view(history: list[Message], budget: int) -> list[Message]:
        head = [m for m in history[:1] if m.role == "system"]
        rest = history[len(head):]
        units = build_units(rest)
        total = counter.count_messages(history)
        start = 0
        while total > budget and start < len(units) - 1:
            total -= sum(counter.count_message(rest[i]) for i in units[start].indices)
            start += 1
        keep = sorted(i for u in units[start:] for i in u.indices)
        return head + [rest[i] for i in keep]

    return view


def masking(counter: MessageCounter, keep: int) -> View:
    slide = sliding(counter)

    def view(history: list[Message], budget: int) -> list[Message]:
        outputs = [i for i, m in enumerate(history) if m.role == "tool"]
        old = set(outputs[:-keep]) if keep else set(outputs)
        masked = [m.with_content("[tool output omitted]") if i in old else m for i, m in enumerate(history)]
        return slide(masked, budget)

    return view


def agents_trimmer(counter: MessageCounter) -> View | None:
    try:
        from agents.extensions import ToolOutputTrimmer
        from agents.run_config import CallModelData, ModelInputData
    except ImportError:
        return None
    trimmer = ToolOutputTrimmer()
    wire = get_format("openai_responses")
    slide = sliding(counter)

    def view(history: list[Message], budget: int) -> list[Message]:
        items = wire.encode(history)
        data = CallModelData(model_data=ModelInputData(input=items, instructions=None), agent=None, context=None)  # type: ignore[arg-type]
        trimmed = trimmer(data).input
        return slide(wire.decode(trimmed), budget)  # type: ignore[arg-type]

    return view


def langchain_trim(counter: MessageCounter, start_on: Any) -> View | None:
    try:
        from langchain_core.messages import (
            AIMessage,
            BaseMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
            trim_messages,
        )
    except ImportError:
        return None
    counts: dict[str, int] = {}

    def to_lc(i: int, m: Message) -> BaseMessage:
        mid = str(i)
        counts[mid] = counter.count_message(m)
        if m.role in ("system", "developer"):
            return SystemMessage(m.text, id=mid)
        if m.role == "user":
            return HumanMessage(m.text, id=mid)
        if m.role == "tool":
            return ToolMessage(m.text, tool_call_id=m.tool_call_id or "", id=mid)
        calls = [{"name": c.name, "args": _args(c.arguments), "id": c.id} for c in m.tool_calls]
        return AIMessage(m.text, tool_calls=calls, id=mid)

    def count(messages: list[BaseMessage]) -> int:
        return sum(counts.get(str(m.id), 0) for m in messages)

    def view(history: list[Message], budget: int) -> list[Message]:
        lc = [to_lc(i, m) for i, m in enumerate(history)]
        kept = trim_messages(lc, max_tokens=budget, strategy="last", token_counter=count, include_system=True,
                             start_on=start_on, allow_partial=False)
        return [history[int(str(m.id))] for m in kept]

    return view


def _args(arguments: str) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


# -- contextfold ------------------------------------------------------------------------------------------------------
def contextfold_row(sessions: Sequence[RecordedSession], window: int, policy: Policy | None) -> dict[str, Any]:
    fields = policy.model_dump(mode="json") if policy is not None else None
    results = [replay_session(s, ReplayOptions(window=window, policy=fields)) for s in sessions]
    d = aggregate(results, {})
    return {
        "recall": _r(d["needed_fact_recall"]), "number_recall": _r(d["number_recall"]),
        "non_number_recall": _r(d["non_number_recall"]), "answered_in_view": _r(d["answered_message_in_view"]),
        "policy_in_view": _r(d["policy_in_view"]), "user_messages_in_view": _r(d["user_messages_in_view"]),
        "valid": _r(d["valid_rate"]), "tokens_vs_unmanaged": _r(d["tokens_sent"] / d["tokens_sent_baseline"]),
        "tokens": d["tokens_sent"], "bill": d["bill"],
    }


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def equal_tokens(scorer: Scorer, view_fn: View, target: int, window: int) -> tuple[int, Score]:
    """The budget at which ``view_fn`` sends about ``target`` tokens in total (bisection), and its score."""
    lo, hi = 200, window
    best: tuple[int, Score] | None = None
    for _ in range(8):
        mid = (lo + hi) // 2
        score = scorer.run(view_fn, mid)
        if best is None or abs(score.tokens - target) < abs(best[1].tokens - target):
            best = (mid, score)
        if abs(score.tokens - target) <= EQUAL_TOKENS_TOLERANCE * target:
            break
        if score.tokens > target:
            hi = mid
        else:
            lo = mid
    assert best is not None
    return best


def compare(name: str, window: int, *, equal: bool = True) -> list[dict[str, Any]]:
    path, _ = SOURCES[name]
    sessions = load_sessions(DATA / path)
    scorer = Scorer(sessions)
    counter = scorer.counter
    budgets = Policy().budgets(window)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    rows.append({"approach": "unmanaged history", "at": "whole", **scorer.run(lambda h, _: h, window, window).row()})
    default = contextfold_row(sessions, window, None)
    rows.append({"approach": "contextfold (default: priced for gpt-4o)", "at": "window", **default})
    # The same defaults deployed with Claude: the policy weighs rewrites at Anthropic's cache prices (issue 25).
    rows.append({"approach": f"contextfold (priced for {REFERENCE_MODELS['anthropic']})", "at": "window",
                 **contextfold_row(sessions, window, Policy(cache_pricing=REFERENCE_MODELS["anthropic"]))})
    rows.append({"approach": "contextfold (Policy.quality())", "at": "window",
                 **contextfold_row(sessions, window, Policy.quality())})
    peers: list[tuple[str, View | None]] = [
        ("sliding window", sliding(counter)),
        ('langchain trim_messages start_on="human"', langchain_trim(counter, "human")),
        ('langchain trim_messages start_on=("human","ai")', langchain_trim(counter, ["human", "ai"])),
        ("openai-agents ToolOutputTrimmer + sliding", agents_trimmer(counter)),
        (f"observation masking (last {MASK_KEEP}) + sliding", masking(counter, MASK_KEEP)),
    ]
    for label, fn in peers:
        if fn is None:
            print(f"  {label}: not installed, skipped", file=sys.stderr)
            continue
        rows.append({"approach": label, "at": "window", **scorer.run(fn, budgets.hard, window).row()})
        if equal:
            budget, score = equal_tokens(scorer, fn, default["tokens"], window)
            rows.append({"approach": label, "at": f"equal tokens (budget {budget})", **score.row()})
    print(f"  {name} @ {window}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return rows


# -- contextfold's digests --------------------------------------------------------------------------------------------
# Policy fields of each kind of masked-output digest compared by --digests (the rest of the policy is the default).
DIGEST_VARIANTS: dict[str, dict[str, Any]] = {
    "full": {}, "light": {"mask_digest": "light"}, "off": {"mask_digest_tokens": 0},
}
# The equal-token search stops within this share of the target (secant steps on the window, at most EQUAL_STEPS).
DIGEST_TOKENS_TOLERANCE = 0.002
EQUAL_STEPS = 5
BOOTSTRAP_SAMPLES = 2_000


def _replayed(sessions: Sequence[RecordedSession], window: int, fields: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    d = aggregate([replay_session(s, ReplayOptions(window=window, policy=fields or None)) for s in sessions], {})
    print(f"    {fields or 'default'} @ {window}: {d['tokens_sent']:,} tokens, recall {d['needed_fact_recall']:.4%} "
          f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return d


def _recall_spread(variant: dict[str, Any], full: dict[str, Any]) -> tuple[float, float, float]:
    """The variant's recall minus the full digest's, and its 95% interval over sessions (paired bootstrap)."""
    pairs = [(v["totals"]["in_view"], f["totals"]["in_view"], f["totals"]["needed"])
             for v, f in zip(variant["per_session"], full["per_session"], strict=True)]

    def diff(sample: Sequence[tuple[int, int, int]]) -> float:
        needed = sum(n for _, _, n in sample)
        return (sum(v for v, _, _ in sample) - sum(f for _, f, _ in sample)) / needed if needed else 0.0

    draw = random.Random(22)
    diffs = sorted(diff(draw.choices(pairs, k=len(pairs))) for _ in range(BOOTSTRAP_SAMPLES))
    return diff(pairs), diffs[int(0.025 * BOOTSTRAP_SAMPLES)], diffs[int(0.975 * BOOTSTRAP_SAMPLES) - 1]


def compare_digests(name: str, window: int, variants: Sequence[str]) -> list[dict[str, Any]]:
    """Rows of contextfold's default policy with each kind of digest, at the window and at the full one's tokens."""
    sessions = load_sessions(DATA / SOURCES[name][0])
    full = _replayed(sessions, window, {})
    rows: list[dict[str, Any]] = []
    for variant in variants:
        fields = DIGEST_VARIANTS[variant]
        at_window = full if not fields else _replayed(sessions, window, fields)
        found = [(window, at_window)]
        # Secant steps on the window until the variant sends the full digest's tokens (tokens grow with the window).
        while fields and len(found) <= EQUAL_STEPS:
            (w0, d0), (w1, d1) = found[-1], found[-2] if len(found) > 1 else (0, {"tokens_sent": 0})
            if abs(d0["tokens_sent"] - full["tokens_sent"]) <= DIGEST_TOKENS_TOLERANCE * full["tokens_sent"]:
                break
            slope = (d0["tokens_sent"] - d1["tokens_sent"]) / (w0 - w1) if w0 != w1 else 0
            step = (full["tokens_sent"] - d0["tokens_sent"]) / slope if slope > 0 else 0
            guess = w0 + max(-window // 10, min(window // 10, round(step or window * 0.01)))
            if any(w == guess for w, _ in found):
                break
            found.append((guess, _replayed(sessions, guess, fields)))
        equal_window, equal = min(found, key=lambda f: abs(f[1]["tokens_sent"] - full["tokens_sent"]))
        for at, d in (("window", at_window), (f"equal tokens (window {equal_window})", equal)):
            if at != "window" and not fields:
                continue
            diff, low, high = _recall_spread(d, full)
            rows.append({"approach": f"contextfold, digest {variant}", "at": at,
                         **{k: _r(d[k]) for k in ("needed_fact_recall", "number_recall", "non_number_recall")},
                         "recall_vs_full": f"{100 * diff:+.2f} pt [{100 * low:+.2f}, {100 * high:+.2f}]",
                         "tokens": d["tokens_sent"], "maskings": d["maskings"], "bill": d["bill"]})
    return rows


def print_digest_rows(name: str, rows: Sequence[dict[str, Any]]) -> None:
    print(f"\n### {name} @ {SOURCES[name][1] // 1000}K: masked outputs' digests\n")
    print("| digest | at | recall | vs full (95% over sessions) | number recall | other facts | tokens "
          "| maskings | bill OpenAI (w/o cache) | bill Anthropic (w/o cache) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        o, a = (r["bill"] or {}).get("openai") or {}, (r["bill"] or {}).get("anthropic") or {}
        print(f"| {r['approach']} | {r['at']} | {_pct(r['needed_fact_recall'])} | {r['recall_vs_full']} | "
              f"{_pct(r['number_recall'])} | {_pct(r['non_number_recall'])} | {r['tokens']:,} | {r['maskings']} | "
              f"{_x(o.get('ratio'))} ({_x(o.get('ratio_uncached'))}) | {_x(a.get('ratio'))} "
              f"({_x(a.get('ratio_uncached'))}) |")


def check_answered() -> int:
    failures = 0
    for name, (path, _) in SOURCES.items():
        for window in (4_000, 8_000, 16_000):
            result = [replay_session(s, ReplayOptions(window=window)) for s in load_sessions(DATA / path)]
            d = aggregate(result, {})
            bad = [(s["id"], t["turn"]) for s in result for t in s["series"] if t["answered_in_view"] is False]
            failures += len(bad)
            print(f"{name} @ {window}: answered message in view {d['answered_message_in_view']:.4%}, "
                  f"valid {d['valid_rate']:.4%}, failures {bad[:5]}")
    return failures


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", default="lm32b,tau,claude")
    parser.add_argument("--answered", action="store_true", help="check the answered-message guarantee exhaustively")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-equal-tokens", action="store_true", help="leave out the peers' equal-token rows")
    parser.add_argument("--digests", default=None,
                        help=f"compare contextfold's digests instead ({','.join(DIGEST_VARIANTS)}; see above)")
    args = parser.parse_args()
    if args.answered:
        return 1 if check_answered() else 0
    if args.digests:
        variants = args.digests.split(",")
        digests = {name: compare_digests(name, SOURCES[name][1], variants) for name in args.sources.split(",")}
        if args.json:
            print(json.dumps(digests, indent=1))
        for name, rows in digests.items():
            print_digest_rows(name, rows)
        return 0
    out: dict[str, list[dict[str, Any]]] = {}
    for name in args.sources.split(","):
        out[name] = compare(name, SOURCES[name][1], equal=not args.no_equal_tokens)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for name, rows in out.items():
        print(f"\n### {name} @ {SOURCES[name][1] // 1000}K\n")
        print("| approach | at | recall | number recall | other facts | answered msg | policy | user msgs | valid "
              "| tokens vs unmanaged | cache hits OpenAI / Anthropic | bill OpenAI (w/o cache) "
              "| bill Anthropic (w/o cache) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            bill = r.get("bill") or {}
            o, a = bill.get("openai") or {}, bill.get("anthropic") or {}
            print(f"| {r['approach']} | {r['at']} | {_pct(r['recall'])} | {_pct(r['number_recall'])} | "
                  f"{_pct(r['non_number_recall'])} | {_pct(r['answered_in_view'])} | {_pct(r['policy_in_view'])} | "
                  f"{_pct(r['user_messages_in_view'])} | {_pct(r['valid'])} | {r['tokens_vs_unmanaged']:.2f}× | "
                  f"{_pct(o.get('hit_share'))} / {_pct(a.get('hit_share'))} | {_x(o.get('ratio'))} "
                  f"({_x(o.get('ratio_uncached'))}) | {_x(a.get('ratio'))} ({_x(a.get('ratio_uncached'))}) |")
        over = next((r["over_window"] for r in rows if r["approach"] == "unmanaged history"), None)
        if over is not None:
            print(f"\nThe unmanaged history overflows the {SOURCES[name][1] // 1000}K window at {_pct(over)} of "
                  "turns; bills are relative to its bill with prompt caching.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
