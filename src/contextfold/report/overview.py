"""The opening of a multi-session report: one plot of every session, and a table that sorts without a script.

The plot puts each session at (input tokens saved, needed-fact recall): the sessions that lose facts or save little
stand out at once among hundreds. The table is rendered once per sort order; the column headers link to the
order they name and CSS ``:target`` shows it, so sorting needs no JavaScript and the page stays self-contained.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

__all__ = ["OVERVIEW_CSS", "session_scatter", "sortable_sessions_table"]

OVERVIEW_CSS = """
.sort-view{display:none}.sort-view:target,.sortable:not(:has(.sort-view:target)) .sort-view.default{display:block}
th a{color:inherit;text-decoration:none}th a:hover{text-decoration:underline}th.sorted{background:#e3ecf8}
"""

_WIDTH, _HEIGHT = 960, 360
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 24, 30, 48
_DOT = "#1f6fd1"
_DOT_BAD = "#c62828"


def _saved(totals: Mapping[str, Any]) -> float | None:
    baseline = totals.get("tokens_sent_baseline") or 0
    return None if not baseline else 1 - totals["tokens_sent"] / baseline


def session_scatter(per_session: Sequence[Mapping[str, Any]]) -> str:
    """Every session as a dot: input tokens saved (x) against needed-fact recall (y), both in percent."""
    x0, x1, y0, y1 = _LEFT, _WIDTH - _RIGHT, _HEIGHT - _BOTTOM, _TOP
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {_WIDTH} {_HEIGHT}" width="{_WIDTH}" '
        f'height="{_HEIGHT}" role="img" aria-label="recall and tokens saved per session" '
        'font-family="system-ui, sans-serif">',
        f'<rect x="0" y="0" width="{_WIDTH}" height="{_HEIGHT}" fill="#ffffff"/>',
    ]
    for pct in range(0, 101, 20):
        y = y0 - (y0 - y1) * pct / 100
        x = x0 + (x1 - x0) * pct / 100
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e6e6e6"/>')
        out.append(f'<text x="{x0 - 8}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{pct}%</text>')
        out.append(f'<text x="{x:.1f}" y="{y0 + 16}" font-size="11" text-anchor="middle">{pct}%</text>')
    out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{_HEIGHT - 8}" font-size="12" text-anchor="middle">'
               "input tokens saved (share of what the session would have sent without contextfold)</text>")
    out.append(f'<text x="14" y="{(y0 + y1) / 2:.0f}" font-size="12" text-anchor="middle" '
               f'transform="rotate(-90 14 {(y0 + y1) / 2:.0f})">needed-fact recall</text>')
    out.append(f'<line x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}" stroke="#555"/>'
               f'<line x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}" stroke="#555"/>')
    drawn = 0
    for n, s in enumerate(per_session):
        totals = s.get("totals") or {}
        saved, recall = _saved(totals), totals.get("needed_fact_recall")
        if s.get("error") or saved is None or recall is None:
            continue
        x = x0 + (x1 - x0) * min(max(saved, 0.0), 1.0)
        y = y0 - (y0 - y1) * min(max(float(recall), 0.0), 1.0)
        bad = totals.get("valid_rate") is not None and totals["valid_rate"] < 1
        title = escape(f"{s['id']}: {100 * saved:.1f}% tokens saved, {100 * recall:.1f}% needed-fact recall, "
                       f"{totals.get('turns', 0)} calls, {totals.get('compactions', 0)} compactions")
        out.append(f'<a href="#s{n}"><circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{_DOT_BAD if bad else _DOT}" '
                   f'fill-opacity="0.7"><title>{title}</title></circle></a>')
        drawn += 1
    out.append(f'<text x="{x1}" y="{y1 - 10}" font-size="11" text-anchor="end" fill="#555">{drawn} sessions · '
               "red: a session with an invalid view</text>")
    out.append("</svg>")
    return "".join(out)


# column label -> (sort key, largest first?) for the columns a reader sorts by.
Row = Mapping[str, Any]
_SORTS: dict[str, tuple[str, Callable[[Row], Any], bool]] = {
    "session": ("session", lambda s: str(s["id"]), False),
    "calls": ("calls", lambda s: s["totals"]["turns"] or 0, True),
    "valid": ("valid", lambda s: s["totals"]["valid_rate"] if s["totals"]["valid_rate"] is not None else -1, False),
    "needed": ("needed", lambda s: _or(s["totals"]["needed_fact_recall"]), False),
    "recoverable": ("recoverable", lambda s: _or(s["totals"]["recoverable_fact_recall"]), False),
    "tokens sent": ("tokens", lambda s: s["totals"]["tokens_sent"] or 0, True),
    "saved": ("saved", lambda s: _or(_saved(s["totals"])), True),
    "cost": ("cost", lambda s: _or(s["totals"]["cost_usd"]), True),
    "compactions": ("compactions", lambda s: s["totals"]["compactions"] or 0, True),
    "maskings": ("maskings", lambda s: s["totals"]["maskings"] or 0, True),
}


def _or(value: float | None) -> float:
    return -1.0 if value is None else float(value)


def sortable_sessions_table(
    per_session: Sequence[Mapping[str, Any]],
    headers: Sequence[str],
    row: Callable[[int, Mapping[str, Any]], tuple[list[str], bool]],
    numeric: frozenset[int],
) -> str:
    """The sessions table once per sort order; ``row(n, session)`` gives the cells and whether to mark the row."""
    orders: list[tuple[str, str, list[int]]] = [("order", "", list(range(len(per_session))))]
    for label, (key, sort_key, largest_first) in _SORTS.items():
        if label in headers:
            indices = sorted(range(len(per_session)), key=lambda i: sort_key(per_session[i]), reverse=largest_first)
            orders.append((key, label, indices))
    links = {label: key for key, label, _ in orders if label}
    views = []
    for key, sorted_by, indices in orders:
        head = []
        for i, h in enumerate(headers):
            classes = [c for c in ("n" if i in numeric else "", "sorted" if h == sorted_by else "") if c]
            cls = f' class="{" ".join(classes)}"' if classes else ""
            text = escape(h)
            if h in links:
                arrow = (" ↓" if _SORTS[h][2] else " ↑") if h == sorted_by else ""
                text = f'<a href="#sessions-by-{links[h]}" title="sort by {escape(h)}">{text}{arrow}</a>'
            head.append(f"<th{cls}>{text}</th>")
        body = []
        for n in indices:
            cells, bad = row(n, per_session[n])
            tds = "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(cells))
            body.append(f'<tr class="bad">{tds}</tr>' if bad else f"<tr>{tds}</tr>")
        default = " default" if key == "order" else ""
        views.append(f'<div class="sort-view{default}" id="sessions-by-{key}"><table><thead><tr>{"".join(head)}'
                     f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>")
    return f'<div class="sortable">{"".join(views)}</div>'
