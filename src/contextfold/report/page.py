"""The HTML report of a replay: one self-contained page (inline CSS and SVG, no script, no network).

Built from the replay JSON (``contextfold replay --json``), so a report can be re-rendered later from a saved
file with ``contextfold report METRICS.json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from ..compaction import DEFAULT_CLEAR_AT_LEAST
from .bill import bill_bars, bill_cards, cumulative_bill_plot
from .overview import OVERVIEW_CSS, session_scatter, sortable_sessions_table
from .svg import token_plot

__all__ = ["render_html"]

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1040px;color:#1b1b1b;
 padding:0 16px;line-height:1.4}
h1{font-size:1.6em;margin:0 0 4px}h2{font-size:1.25em;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:1.05em;margin:18px 0 6px}.muted{color:#666}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:130px;background:#fafafa}
.card b{display:block;font-size:1.3em}.card span{font-size:.85em;color:#555}
table{border-collapse:collapse;width:100%;font-size:.88em;margin:6px 0 12px}
th,td{border-bottom:1px solid #e6e6e6;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
tr.bad td{background:#fdecea}pre{white-space:pre-wrap;background:#f7f7f7;border:1px solid #e3e3e3;padding:8px;
 font-size:.85em;max-height:420px;overflow:auto}details{margin:8px 0}summary{cursor:pointer;font-weight:600}
svg.plot{max-width:100%;height:auto;border:1px solid #e3e3e3}code{font-size:.9em}
p.plot-note{font-size:.85em;color:#555;margin:2px 0 10px}
""" + OVERVIEW_CSS

# Sessions beyond this many get a collapsed section each; the first few open so the page shows plots at once.
OPEN_SESSIONS = 3
# Per-turn retention misses listed per session: enough to judge what is lost without a wall of entities.
MAX_MISS_ROWS = 40
# The events that changed the view, and the word the events table uses for each. Everything else (decisions,
# spans, warnings) is counted under the table; errors are always listed.
VIEW_CHANGES: Mapping[str, str] = {
    "cache.truncated": "truncated",
    "cache.masked": "masked",
    "compact.summary_created": "summarized",
    "compact.pruned_messages": "pruned",
    "recovery.retry": "recovered",
}


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:,.4f}"


def _int(value: Any) -> str:
    return "–" if value is None else f"{int(value):,}"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} ms"


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{escape(value)}</b><span>{escape(label)}</span></div>'


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: frozenset[int] = frozenset(),
           bad: Sequence[bool] = ()) -> str:
    head = "".join(f'<th class="n">{escape(h)}</th>' if i in numeric else f"<th>{escape(h)}</th>"
                   for i, h in enumerate(headers))
    body = []
    for r, row in enumerate(rows):
        cls = ' class="bad"' if r < len(bad) and bad[r] else ""
        cells = "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _saved(sent: int, baseline: int) -> str:
    return "–" if not baseline else f"{100 * (1 - sent / baseline):.1f}%"


def _headline(r: Mapping[str, Any]) -> str:
    # The bill with prompt caching counted leads: a saving in tokens that the cache takes back is no saving.
    cards = [_card(value, label) for value, label in bill_cards(r.get("bill") or {})]
    cards += [
        _card(_int(r["sessions"]), "sessions"),
        _card(_int(r["turns"]), "model calls"),
        _card(_pct(r["valid_rate"]), "valid views"),
        _card(_pct(r["needed_fact_recall"]), "needed-fact recall (in view)"),
        _card(_pct(r["recoverable_fact_recall"]), "recoverable-fact recall"),
        _card(_pct(r.get("compacted_fact_recall")), "recall of compacted facts"),
        _card(f"{_int(r['tokens_sent'])}", "tokens sent"),
        _card(f"{_int(r['tokens_sent_baseline'])}", "tokens sent without contextfold"),
        _card(_saved(r["tokens_sent"], r["tokens_sent_baseline"]), "input tokens saved"),
        _card(_usd(r["cost_usd"]), "cost"),
        _card(_usd(r["cost_usd_cached"]), "cost with prompt caching"),
        _card(_usd(r.get("cost_usd_baseline_cached")), "cost without contextfold, with prompt caching"),
        _card(_usd(r.get("cost_usd_baseline")), "cost without contextfold, without caching"),
        _card(_int(r["compactions"]), "compactions"),
        _card(_int(r["maskings"]), "maskings"),
        _card(f"{_ms(r['prepare_ms_median'])} / {_ms(r['prepare_ms_p99'])}", "prepare() median / p99"),
    ]
    if r.get("policy_in_view") is not None:
        cards.append(_card(_pct(r["policy_in_view"]), "system policy in view"))
        cards.append(_card(_pct(r.get("user_messages_in_view")), "user messages in view (verbatim)"))
    return f'<div class="cards">{"".join(cards)}</div>'


def _settings(r: Mapping[str, Any]) -> str:
    window = _int(r.get("window")) if r.get("window") else "the model's own"
    policy = json.dumps(r.get("policy") or {}, sort_keys=True) if r.get("policy") else "defaults"
    return (f'<p class="muted">model <code>{escape(str(r.get("model")))}</code> · window {escape(window)} · '
            f'format <code>{escape(str(r.get("format") or "each session’s own"))}</code> · summarizer '
            f'<code>{escape(str(r.get("summarizer")))}</code> · policy <code>{escape(policy)}</code></p>')


def _sessions_table(per_session: Sequence[Mapping[str, Any]]) -> str:
    def row(n: int, s: Mapping[str, Any]) -> tuple[list[str], bool]:
        t = s["totals"]
        cells = [
            f'<a href="#s{n}">{escape(str(s["id"]))}</a>', escape(str(s["source"])), _int(t["turns"]),
            _pct(t["valid_rate"]), _pct(t["needed_fact_recall"]), _pct(t["recoverable_fact_recall"]),
            _int(t["tokens_sent"]), _int(t["tokens_sent_baseline"]),
            _saved(t["tokens_sent"], t["tokens_sent_baseline"]),
            _usd(t["cost_usd"]), _usd(t["cost_usd_cached"]), _int(t["compactions"]), _int(t["maskings"]),
        ]
        return cells, bool(s.get("error")) or (t["valid_rate"] is not None and t["valid_rate"] < 1)

    headers = ["session", "source", "calls", "valid", "needed", "recoverable", "tokens sent", "baseline", "saved",
               "cost", "cached", "compactions", "maskings"]
    return sortable_sessions_table(per_session, headers, row, frozenset(range(2, 13)))


def _figures(s: Mapping[str, Any]) -> str:
    t = s["totals"]
    rows = [
        ["messages in the recording", _int(s["messages"])],
        ["model calls (assistant turns)", _int(t["turns"])],
        ["valid views", f"{_int(t['valid_turns'])} ({_pct(t['valid_rate'])})"],
        ["peak raw history / peak view", f"{_int(t['peak_raw_tokens'])} / {_int(t['peak_view_tokens'])} tokens"],
        ["tokens sent / without contextfold",
         f"{_int(t['tokens_sent'])} / {_int(t['tokens_sent_baseline'])} "
         f"({_saved(t['tokens_sent'], t['tokens_sent_baseline'])} saved)"],
        ["cost / with prompt caching / without contextfold",
         f"{_usd(t['cost_usd'])} / {_usd(t['cost_usd_cached'])} / {_usd(t['cost_usd_baseline'])}"],
        *_bill_rows(t),
        ["compactions / maskings", f"{_int(t['compactions'])} / {_int(t['maskings'])}"],
        ["needed-fact recall (in view)", f"{_pct(t['needed_fact_recall'])} of {_int(t['needed'])} uses"],
        ["recoverable-fact recall (view or cached output)", f"{_pct(t['recoverable_fact_recall'])}"],
        ["recall of facts last seen before a compaction",
         f"{_pct(t['compacted_fact_recall'])} of {_int(t['compacted_needed'])} uses"],
    ]
    if t["policy_turns"]:
        rows.append(["system policy in view", _pct(t["policy_in_view_turns"] / t["policy_turns"])])
        rows.append(["user messages in view (verbatim)",
                     _pct(t["user_messages_in_view"] / t["user_messages"] if t["user_messages"] else None)])
    return _table(["figure", "value"], ([escape(a), escape(b)] for a, b in rows))


def _bill_rows(t: Mapping[str, Any]) -> list[list[str]]:
    """Per provider: the session's input bill with caching against the unmanaged history's, and the hit share."""
    rows = []
    view, unmanaged = t.get("bill") or {}, t.get("bill_unmanaged") or {}
    for provider in sorted(view):
        v, u = view[provider], unmanaged.get(provider)
        if u is None or not u.get("units"):
            continue
        hits = v["cache_read"] / v["tokens"] if v.get("tokens") else None
        rows.append([f"input bill with prompt caching vs unmanaged ({provider} rates)",
                     f"{v['units'] / u['units']:.2f}× ({round(v['units']):,} / {round(u['units']):,} fresh-token "
                     f"units; {_pct(hits)} of the input read from the cache)"])
    return rows


def _events(s: Mapping[str, Any]) -> str:
    """What changed the view, one row each; decisions that changed nothing and the other events, counted."""
    rows, bad = [], []
    folded: dict[str, int] = {}
    for e in s["events"]:
        change = VIEW_CHANGES.get(e["name"])
        if change is None and e["status"] != "error":
            folded[e["name"]] = folded.get(e["name"], 0) + 1
            continue
        data = "; ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in e["data"].items())
        rows.append([_int(e["turn"]) if e["turn"] is not None else "–", escape(change or "error"),
                     f"<code>{escape(e['name'])}</code>", escape(data)])
        bad.append(e["status"] == "error")
    decisions = folded.pop("compact.trigger_decision", 0) + int(s.get("noop_decisions") or 0)
    others = ", ".join(f"{n} <code>{escape(name)}</code>" for name, n in sorted(folded.items()))
    note = (f'<p class="muted">Listed: what changed the view. Not listed: {decisions:,} trigger decisions (the '
            f"changes they led to are the rows), {s['events_omitted']:,} token estimates (one per call)"
            + (f", and {others}" if others else "") + ".</p>")
    if not rows:
        return note.replace("Listed: what changed the view. ", "Nothing changed the view. ")
    return note + _table(["message", "change", "event", "figures"], rows, frozenset({0}), bad)


def _batching_note(s: Mapping[str, Any], clear_at_least: int) -> str:
    """The line under the plot: why the view may sit over the soft line while nothing happens."""
    soft = int((s.get("thresholds") or {}).get("soft") or 0)
    series = s["series"]
    if not soft or not series:
        return ""
    over = idle = 0
    previous: Mapping[str, Any] | None = None
    for t in series:
        if t["view_tokens"] > soft:
            over += 1
            acted = previous is None or (t["compactions"], t["maskings"]) != (previous["compactions"],
                                                                            previous["maskings"])
            idle += int(not acted)
        previous = t
    if over:
        where = (f"The view sent was over the soft line ({soft:,} tokens) at {over} of {len(series)} calls, {idle} "
                 "of them with nothing done: contextfold works in batches.")
    else:
        where = (f"The view sent stayed under the soft line ({soft:,} tokens) at all {len(series)} calls; "
                 "contextfold works in batches.")
    return (f'<p class="plot-note">{where} Masking (▲) waits until it can free at least {clear_at_least:,} tokens '
            "at once, and a soft summary (│ compaction) is applied only when it saves that much, because each one "
            "rewrites the middle of the history and costs the prompt cache from there on; each also waits while what "
            "it frees over the coming calls does not pay for the cached tokens it invalidates at the model's cache "
            "prices (<code>compact.cache_decision</code> events). Over the hard line it acts at once.</p>")


def _summaries(s: Mapping[str, Any]) -> str:
    if not s["summaries"]:
        return '<p class="muted">No summary was produced.</p>'
    out = []
    for n, summary in enumerate(s["summaries"], start=1):
        out.append(
            f"<details><summary>summary {n} before message {_int(summary['turn'])}: "
            f"{_int(summary['input_messages'])} messages, {_int(summary['input_tokens'])} → "
            f"{_int(summary['summary_tokens'])} tokens ({escape(str(summary['strategy']))})</summary>"
            f"<pre>{escape(summary['summary'])}</pre></details>"
        )
    return "".join(out)


def _misses(s: Mapping[str, Any]) -> str:
    rows = [[_int(t["turn"]), escape(", ".join(t["missing"]))] for t in s["series"] if t["missing"]]
    if not rows:
        return '<p class="muted">Every entity a turn used was in the view or in a cached output it references.</p>'
    extra = len(rows) - MAX_MISS_ROWS
    more = f'<p class="muted">{extra} more turns not listed.</p>' if extra > 0 else ""
    return _table(["message", "entities used but neither in view nor recoverable"], rows[:MAX_MISS_ROWS],
                  frozenset({0})) + more


def _invalid(s: Mapping[str, Any]) -> str:
    rows = [[_int(t["turn"]), escape(str(t["error"]))] for t in s["series"] if not t["valid"]]
    return _table(["message", "problem"], rows, frozenset({0}), [True] * len(rows)) if rows else ""


def _session(n: int, s: Mapping[str, Any], clear_at_least: int = DEFAULT_CLEAR_AT_LEAST) -> str:
    title = f"{escape(str(s['id']))} <span class=\"muted\">({escape(str(s['source']))})</span>"
    if s.get("error"):
        body = f"<pre>{escape(str(s['error']))}</pre>"
    else:
        body = "".join([
            token_plot(s["series"], s["thresholds"], label=f"tokens per turn of {s['id']}"),
            _batching_note(s, clear_at_least),
            cumulative_bill_plot(s["series"], "anthropic"),
            _figures(s), _invalid(s),
            "<h3>Summaries</h3>", _summaries(s),
            "<h3>Retention misses</h3>", _misses(s),
            "<h3>Events</h3>", _events(s),
        ])
    opened = " open" if n < OPEN_SESSIONS else ""
    return f'<details id="s{n}"{opened}><summary>{title}</summary>{body}</details>'


def render_html(result: Mapping[str, Any], *, title: str = "contextfold replay report") -> str:
    """The report page for a replay JSON object."""
    per_session = result["per_session"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        _settings(result),
        "<p>Each recorded assistant turn is one model call: contextfold built the view the model would have "
        "received, and these figures measure it. <em>Needed-fact recall</em>: of the entities (paths, identifiers, "
        "numbers) a turn uses that occurred earlier, the share in the view's text; <em>recoverable</em> adds those "
        "in a cached tool output whose ref the view shows. Costs use the model's list prices. "
        "<em>The input bill with prompt caching</em> is what the provider charges once its prompt cache is counted "
        "(cache reads at a discount, Anthropic's cache writes at a premium, only unchanged leading messages "
        "cached; contextfold.billing): at OpenAI's rates (gpt-4o) and Anthropic's (Claude Sonnet 4), relative "
        "to sending the unmanaged history with prompt caching as well.</p>",
        _headline(result),
        bill_bars(result.get("bill") or {}),
    ]
    if len(per_session) > 1:
        parts += ["<h2>Sessions</h2>", session_scatter(per_session),
                  '<p class="plot-note">One dot per session; hover for its figures, click to open it. Click a column '
                  "header to sort the table.</p>", _sessions_table(per_session)]
    parts.append("<h2>Per session</h2>")
    policy = result.get("policy") or {}
    clear_at_least = int(policy.get("clear_at_least") or DEFAULT_CLEAR_AT_LEAST)
    parts += [_session(n, s, clear_at_least) for n, s in enumerate(per_session)]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
