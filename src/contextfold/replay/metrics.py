"""What a replay measures, per turn and in aggregate: tokens, validity, the bill with and without caching, retention.

Pure functions over plain data. Per-session results travel between processes and into the JSON the HTML report
reads, so they are dicts of JSON values; :class:`TurnMetrics` is the typed form of one entry of a session's
``series``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..billing import REFERENCE_MODELS, Bill
from ..cache import REF_PATTERN
from ..messages import Message
from ..summarize.entities import extract_entities

if TYPE_CHECKING:
    from ..billing import RequestBill

__all__ = [
    "JSON_VERSION",
    "TurnMetrics",
    "aggregate",
    "bill_entry",
    "bill_summary",
    "contains_fact",
    "is_number_fact",
    "message_search_text",
    "percentile",
    "ratio",
    "refs_in",
    "session_totals",
    "turn_entities",
]

# Bumped when a key of the replay JSON changes meaning, so that ``contextfold report`` can refuse old files.
# 3: ``cost_usd_cached`` bills with the prompt-cache model of contextfold.billing (writes, lifetimes, minimums), not
# the prefix shared with the previous call at the read price; ``bill`` and ``bill_unmanaged`` are new.
JSON_VERSION = 3
# Entities listed per turn as missing from the view and the cache: enough to see a pattern, small enough that
# the JSON of a 200-session replay stays a few megabytes.
MAX_MISSING_LISTED = 8


@dataclass(slots=True)
class TurnMetrics:
    """The figures of one assistant turn (one model call) of a replay.

    ``turn`` is the index, in the imported session's message list, of the assistant message that answers the view.
    Token counts are the manager's counter; costs are USD for this call alone, output included (None when the model
    has no prices): ``cost_usd`` without caching, ``cost_usd_cached`` with prompt caching at the model's rates
    (``cached_tokens`` read from its cache), ``cost_usd_baseline(_cached)`` the same for the unmanaged history.
    ``bill`` and ``bill_unmanaged`` give the input bill of the view and of the unmanaged history at each reference
    provider's rates (:data:`~contextfold.billing.REFERENCE_MODELS`): tokens read, written and fresh, and the bill in
    units of one fresh input token.
    Retention counts cover the entities this turn uses that occurred earlier in the session: ``needed`` of them,
    ``in_view`` in the view's text, ``recoverable`` in the view or in a cached output whose ref the view shows.
    ``compacted_*`` restrict that to entities last seen before the latest compaction (zero before any).
    """

    turn: int
    raw_tokens: int
    view_tokens: int
    view_messages: int
    maskings: int
    compactions: int
    prepare_ms: float
    valid: bool
    error: str | None
    tokens_sent: int
    tokens_sent_baseline: int
    cached_tokens: int
    output_tokens: int
    cost_usd: float | None
    cost_usd_cached: float | None
    cost_usd_baseline: float | None
    cost_usd_baseline_cached: float | None = None
    bill: dict[str, dict[str, float]] = field(default_factory=dict)
    bill_unmanaged: dict[str, dict[str, float]] = field(default_factory=dict)
    needed: int = 0
    in_view: int = 0
    recoverable: int = 0
    compacted_needed: int = 0
    compacted_recoverable: int = 0
    missing: tuple[str, ...] = ()
    policy_in_view: bool | None = None
    user_messages: int = 0
    user_messages_in_view: int = 0
    needed_numbers: int = 0
    numbers_in_view: int = 0
    answered_in_view: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (the ``series`` entries of the replay JSON)."""
        out = asdict(self)
        out["missing"] = list(self.missing)
        out["prepare_ms"] = round(self.prepare_ms, 3)
        return out


# -- text and entities ------------------------------------------------------------------------------------------------
def message_search_text(message: Message) -> str:
    r"""Everything of ``message`` an entity can be found in: its text and its tool calls' names and arguments.

    Arguments are read as the model wrote them, not as JSON escapes them: string values are decoded (``key: value``
    lines), so that ``print`` after a newline in a command is a whole word, not the tail of ``\nprint``.
    """
    if not message.tool_calls:
        return message.text
    calls = "\n".join(_call_text(c.name, c.arguments) for c in message.tool_calls)
    return f"{message.text}\n{calls}" if message.text else calls


def _call_text(name: str, arguments: str) -> str:
    try:
        parsed = json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):
        return f"{name} {arguments}"
    if not isinstance(parsed, dict):
        return f"{name} {arguments}"
    lines = [name]
    for key, value in parsed.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{key}: {shown}")
    return "\n".join(lines)


# What a turn may reuse by exact spelling besides the named entities: bare numbers of three digits or more (line
# numbers, prices, counts, card digits), ISO dates, alphanumeric codes (reservation and flight ids) and quoted
# strings of the assistant's prose. Counting them is what keeps the recall figure honest: numbers are what
# summaries and placeholders lose first.
# A number grouped in thousands is one fact ("$2,544" is 2,544): its last groups alone ("544") occur in no text as
# whole words, so counting them made misses no view could avoid (18 in the tau-bench turns).
_BARE_NUMBER = re.compile(r"(?<![\w.])(?<!\d,)(?:\d{3,}|\d{1,2}(?=,\d{3}))(?:[.,]\d+)*(?![\w]|[.,]\d)")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_ALNUM_CODE = re.compile(r"\b(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{3,}\b")
_QUOTED = re.compile(r"\"([^\"\n]{3,80})\"|'([^'\n]{3,80})'")
_NUMBER_CHARS = frozenset("0123456789$.,:+-/ T%")


def turn_entities(message: Message) -> set[str]:
    """The facts an assistant turn uses: entities, bare numbers, dates, codes and quoted strings.

    Entities come from :func:`~contextfold.summarize.entities.extract_entities` over the text and the tool calls'
    names and arguments; the extra kinds are found in the same text (quoted strings only in the prose: the quotes
    of a JSON argument object delimit keys, not facts). A fact is kept only if it is a whole word of the turn as
    :func:`contains_fact` reads it: the extractors' own boundaries differ (``python3`` out of ``python3.9``,
    ``$23`` out of ``$23a``), and a fact the turn does not hold as a word is one no view could be found to hold
    either (87 such in the lm32b messages).
    """
    text = message_search_text(message)
    facts = extract_entities(text)
    facts.update(_BARE_NUMBER.findall(text))
    facts.update(_DATE.findall(text))
    facts.update(_ALNUM_CODE.findall(text))
    for double, single in _QUOTED.findall(message.text):
        quoted = (double or single).strip()
        if len(quoted) >= 3 and any(c.isalnum() for c in quoted):
            facts.add(quoted)
    return {fact for fact in facts if contains_fact(text, fact)}


def is_number_fact(fact: str) -> bool:
    """Whether ``fact`` is a number, a date or an amount (digits and number punctuation only)."""
    return any(c.isdigit() for c in fact) and all(c in _NUMBER_CHARS for c in fact)


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def contains_fact(text: str, fact: str) -> bool:
    """Whether ``fact`` occurs in ``text`` as a whole word: ``123`` is not in ``1234`` nor in ``12.345``.

    Boundaries are checked only where the fact itself starts or ends with a word character (a path ending in
    ``/`` may be followed by anything).
    """
    if not fact:
        return False
    check_start, check_end = _word_char(fact[0]), _word_char(fact[-1])
    n, k = len(text), len(fact)
    start = text.find(fact)
    while start >= 0:
        end = start + k
        ok_start = not check_start or start == 0 or not (
            _word_char(text[start - 1])
            or (fact[0].isdigit() and text[start - 1] in ".," and start >= 2 and text[start - 2].isdigit())
        )
        ok_end = not check_end or end == n or not (
            _word_char(text[end])
            or (fact[-1].isdigit() and text[end] in ".," and end + 1 < n and text[end + 1].isdigit())
        )
        if ok_start and ok_end:
            return True
        start = text.find(fact, start + 1)
    return False


def refs_in(text: str, messages: Iterable[Message] = ()) -> set[str]:
    """Tool-output refs quoted in ``text`` or carried in the messages' meta."""
    found = set(REF_PATTERN.findall(text))
    for m in messages:
        ref = m.meta.get("ref")
        if isinstance(ref, str):
            found.add(ref)
    return found


# -- the bill ---------------------------------------------------------------------------------------------------------
def bill_entry(bill: RequestBill) -> dict[str, float]:
    """One request's bill as it is kept in a turn's ``bill`` (tokens read, written, fresh; units)."""
    return {"read": bill.cache_read, "write": bill.cache_write, "fresh": bill.fresh, "units": round(bill.units, 3)}


def _add_entries(entries: Iterable[Mapping[str, Mapping[str, float]]]) -> dict[str, Bill]:
    bills: dict[str, Bill] = {}
    for entry in entries:
        for name, e in entry.items():
            b = bills.setdefault(name, Bill())
            b.requests += 1
            b.cache_read += int(e["read"])
            b.cache_write += int(e["write"])
            b.fresh += int(e["fresh"])
            b.tokens += int(e["read"] + e["write"] + e["fresh"])
            b.units += float(e["units"])
            b.usd = None  # per-turn entries keep units; prices are applied once, in bill_summary
    return bills


def bill_summary(view: Mapping[str, Bill], unmanaged: Mapping[str, Bill]) -> dict[str, Any]:
    """Per reference provider: the view's and the unmanaged history's bills, and the ratios the report shows.

    ``ratio``: the view's bill with caching over the unmanaged history's bill with caching (the reference);
    ``ratio_uncached``: the view's bill without caching (every token fresh) over that same reference;
    ``unmanaged_uncached``: the unmanaged history without caching over it. USD at the provider's input price.
    """
    from ..billing import cache_rates

    out: dict[str, Any] = {}
    for name in view:
        if name not in REFERENCE_MODELS or name not in unmanaged:
            continue
        rates = cache_rates(REFERENCE_MODELS[name])
        v, u = view[name], unmanaged[name]
        price = rates.input_price

        def usd(units: float, price: float | None = price) -> float | None:
            return None if price is None else round(units * price / 1_000_000, 6)

        out[name] = {
            "model": rates.model,
            "view": {**v.to_dict(), "usd": usd(v.units)},
            "unmanaged": {**u.to_dict(), "usd": usd(u.units)},
            "hit_share": _rounded(v.hit_share, 4),
            "unmanaged_hit_share": _rounded(u.hit_share, 4),
            "ratio": _rounded(ratio(v.units, u.units), 4),
            "ratio_uncached": _rounded(ratio(v.tokens, u.units), 4),
            "unmanaged_uncached": _rounded(ratio(u.tokens, u.units), 4),
        }
    return out


# -- aggregation ------------------------------------------------------------------------------------------------------
def ratio(part: float, whole: float) -> float | None:
    """``part / whole``, or None when there is nothing to divide (a share of nothing is not 0 or 1)."""
    return part / whole if whole else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) with linear interpolation between closest ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _sum_costs(values: Iterable[float | None]) -> float | None:
    total = 0.0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def session_totals(series: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The totals of one session's per-turn series (the figures the aggregate adds up)."""
    last = series[-1] if series else {}
    needed = sum(t["needed"] for t in series)
    compacted_needed = sum(t["compacted_needed"] for t in series)
    users = sum(t["user_messages"] for t in series)
    policy_turns = [t["policy_in_view"] for t in series if t["policy_in_view"] is not None]
    answered = [t["answered_in_view"] for t in series if t.get("answered_in_view") is not None]
    numbers = sum(t.get("needed_numbers", 0) for t in series)
    numbers_in = sum(t.get("numbers_in_view", 0) for t in series)
    in_view = sum(t["in_view"] for t in series)
    return {
        "turns": len(series),
        "valid_turns": sum(1 for t in series if t["valid"]),
        "valid_rate": ratio(sum(1 for t in series if t["valid"]), len(series)),
        "needed": needed,
        "in_view": sum(t["in_view"] for t in series),
        "recoverable": sum(t["recoverable"] for t in series),
        "needed_fact_recall": ratio(in_view, needed),
        "needed_numbers": numbers,
        "numbers_in_view": numbers_in,
        "number_recall": ratio(numbers_in, numbers),
        "non_number_recall": ratio(in_view - numbers_in, needed - numbers),
        "answered_turns": len(answered),
        "answered_in_view_turns": sum(1 for a in answered if a),
        "answered_message_in_view": ratio(sum(1 for a in answered if a), len(answered)),
        "recoverable_fact_recall": ratio(sum(t["recoverable"] for t in series), needed),
        "compacted_needed": compacted_needed,
        "compacted_recoverable": sum(t["compacted_recoverable"] for t in series),
        "compacted_fact_recall": ratio(sum(t["compacted_recoverable"] for t in series), compacted_needed),
        "policy_turns": len(policy_turns),
        "policy_in_view_turns": sum(1 for p in policy_turns if p),
        "user_messages": users,
        "user_messages_in_view": sum(t["user_messages_in_view"] for t in series),
        "tokens_sent": int(last.get("tokens_sent", 0)),
        "tokens_sent_baseline": int(last.get("tokens_sent_baseline", 0)),
        "cost_usd": _sum_costs(t["cost_usd"] for t in series),
        "cost_usd_cached": _sum_costs(t["cost_usd_cached"] for t in series),
        "cost_usd_baseline": _sum_costs(t["cost_usd_baseline"] for t in series),
        "cost_usd_baseline_cached": _sum_costs(t.get("cost_usd_baseline_cached") for t in series),
        "bill": {k: b.to_dict() for k, b in _add_entries(t.get("bill") or {} for t in series).items()},
        "bill_unmanaged": {k: b.to_dict() for k, b in
                           _add_entries(t.get("bill_unmanaged") or {} for t in series).items()},
        "compactions": int(last.get("compactions", 0)),
        "maskings": int(last.get("maskings", 0)),
        "peak_raw_tokens": max((t["raw_tokens"] for t in series), default=0),
        "peak_view_tokens": max((t["view_tokens"] for t in series), default=0),
    }


def _sum_bills(per_session: Iterable[Mapping[str, Mapping[str, Any]]]) -> dict[str, Bill]:
    bills: dict[str, Bill] = {}
    for session in per_session:
        for name, data in session.items():
            bills.setdefault(name, Bill()).merge(Bill.from_dict(data))
    return bills


def aggregate(per_session: Sequence[Mapping[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The replay JSON: the headline figures over every session, then ``settings`` and ``per_session``."""
    totals = [s["totals"] for s in per_session]
    times = [t["prepare_ms"] for s in per_session for t in s["series"]]

    def add(key: str) -> int:
        return int(sum(t[key] for t in totals))

    turns, needed, compacted = add("turns"), add("needed"), add("compacted_needed")
    sent, baseline = add("tokens_sent"), add("tokens_sent_baseline")
    policy_turns, users = add("policy_turns"), add("user_messages")
    numbers, numbers_in, in_view = add("needed_numbers"), add("numbers_in_view"), add("in_view")
    return {
        "version": JSON_VERSION,
        **settings,
        "sessions": len(per_session),
        "failed_sessions": sum(1 for s in per_session if s.get("error")),
        "turns": turns,
        "valid_turns": add("valid_turns"),
        "valid_rate": ratio(add("valid_turns"), turns),
        "needed_entities": needed,
        "needed_fact_recall": ratio(in_view, needed),
        "needed_numbers": numbers,
        "number_recall": ratio(numbers_in, numbers),
        "non_number_recall": ratio(in_view - numbers_in, needed - numbers),
        "answered_message_in_view": ratio(add("answered_in_view_turns"), add("answered_turns")),
        "recoverable_fact_recall": ratio(add("recoverable"), needed),
        "compacted_entities": compacted,
        "compacted_fact_recall": ratio(add("compacted_recoverable"), compacted),
        "policy_in_view": ratio(add("policy_in_view_turns"), policy_turns),
        "user_messages_in_view": ratio(add("user_messages_in_view"), users),
        "tokens_sent": sent,
        "tokens_sent_baseline": baseline,
        "tokens_saved_pct": _rounded(None if not baseline else 100 * (1 - sent / baseline), 2),
        "cost_usd": _rounded(_sum_costs(t["cost_usd"] for t in totals), 6),
        "cost_usd_cached": _rounded(_sum_costs(t["cost_usd_cached"] for t in totals), 6),
        "cost_usd_baseline": _rounded(_sum_costs(t["cost_usd_baseline"] for t in totals), 6),
        "cost_usd_baseline_cached": _rounded(_sum_costs(t.get("cost_usd_baseline_cached") for t in totals), 6),
        "bill": bill_summary(_sum_bills(t.get("bill") or {} for t in totals),
                             _sum_bills(t.get("bill_unmanaged") or {} for t in totals)),
        "compactions": add("compactions"),
        "maskings": add("maskings"),
        "summaries": sum(len(s["summaries"]) for s in per_session),
        "prepare_ms_median": _rounded(percentile(times, 50), 3),
        "prepare_ms_p99": _rounded(percentile(times, 99), 3),
        "prepare_ms_max": _rounded(max(times, default=None), 3),
        "per_session": list(per_session),
    }
