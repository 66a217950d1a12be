"""The bill with prompt caching counted, drawn.

One bar group per reference provider, relative to the unmanaged history's bill *with* caching (the 1.0 line), and
the cumulative bill of one session turn by turn.

A saving that only shows without caching is no saving: each bar group puts the view's bill with caching next to the
same views with every token fresh, and the unmanaged history both ways.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from .svg import nice_ticks

__all__ = ["bill_bars", "bill_cards", "cumulative_bill_plot"]

_WIDTH, _HEIGHT = 960, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 24, 24, 64
# (key in a provider's bill summary, label, colour): the view with caching first, the reference last.
_BARS: tuple[tuple[str, str, str], ...] = (
    ("ratio", "contextfold, with caching", "#1f6fd1"),
    ("ratio_uncached", "contextfold, every token fresh", "#9cc0ec"),
    ("unmanaged", "unmanaged history, with caching (the 1.0× reference)", "#5f5f5f"),
    ("unmanaged_uncached", "unmanaged history, every token fresh", "#bdbdbd"),
)
_PROVIDER_LABELS = {"openai": "OpenAI rates", "anthropic": "Anthropic rates"}
# Past this, bars are clipped and their value written on them: without caching the unmanaged history of a long
# session costs 5-6x its cached bill, and a linear axis up to there would flatten the bars that matter.
_CLIP = 2.0


def _value(summary: Mapping[str, Any], key: str) -> float | None:
    if key == "unmanaged":
        return 1.0
    value = summary.get(key)
    return None if value is None else float(value)


def bill_cards(bill: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(value, label) pairs for the headline: each provider's bill with caching against the unmanaged history's."""
    cards = []
    for provider, summary in bill.items():
        ratio = summary.get("ratio")
        if ratio is None:
            continue
        label = _PROVIDER_LABELS.get(provider, provider)
        saved = 100 * (1 - float(ratio))
        cards.append((f"{float(ratio):.2f}×",
                      f"input bill with prompt caching vs unmanaged ({label}, {summary.get('model')}): "
                      f"{abs(saved):.0f}% {'saved' if saved >= 0 else 'more'}"))
        hits = summary.get("hit_share")
        if hits is not None:
            cards.append((f"{100 * float(hits):.1f}%", f"input read from the prompt cache ({label})"))
    return cards


def bill_bars(bill: Mapping[str, Any]) -> str:
    """Bars per provider: the view's bill with and without caching, the unmanaged history's, over the reference."""
    providers = [(p, s) for p, s in bill.items() if s.get("ratio") is not None]
    if not providers:
        return ""
    x0, x1, y0, y1 = _LEFT, _WIDTH - _RIGHT, _HEIGHT - _BOTTOM, _TOP
    top = min(_CLIP, max(max((_value(s, k) or 0.0) for _, s in providers for k, _, _ in _BARS), 1.0))
    ticks = [t for t in nice_ticks(top, 4) if t <= top * 1.001] or [0.0, 1.0]

    def y(v: float) -> float:
        return y0 - (y0 - y1) * min(v, top) / top

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {_WIDTH} {_HEIGHT}" width="{_WIDTH}" '
        f'height="{_HEIGHT}" role="img" aria-label="input bill with prompt caching, relative to the unmanaged '
        'history" font-family="system-ui, sans-serif">',
        f'<rect x="0" y="0" width="{_WIDTH}" height="{_HEIGHT}" fill="#ffffff"/>',
    ]
    for t in ticks:
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#e6e6e6"/>')
        out.append(f'<text x="{x0 - 8}" y="{y(t) + 4:.1f}" font-size="11" text-anchor="end">{t:.1f}×</text>')
    out.append(f'<line x1="{x0}" x2="{x1}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}" stroke="#5f5f5f" '
               'stroke-dasharray="5,4"/>')
    group = (x1 - x0) / len(providers)
    bar = min(70.0, group / (len(_BARS) + 2))
    for g, (provider, summary) in enumerate(providers):
        left = x0 + g * group + (group - bar * len(_BARS)) / 2
        for b, (key, label, color) in enumerate(_BARS):
            value = _value(summary, key)
            if value is None:
                continue
            bx = left + b * bar
            clipped = value > top
            out.append(f'<rect x="{bx + 3:.1f}" y="{y(value):.1f}" width="{bar - 6:.1f}" '
                       f'height="{y(0) - y(value):.1f}" fill="{color}"><title>{escape(label)}: {value:.2f}× '
                       f"({escape(_PROVIDER_LABELS.get(provider, provider))})</title></rect>")
            fill = ' fill="#ffffff"' if clipped else ""
            out.append(f'<text x="{bx + bar / 2:.1f}" y="{y(value) + (14 if clipped else -4):.1f}" font-size="11" '
                       f'text-anchor="middle"{fill}>{value:.2f}×</text>')
        name = f"{_PROVIDER_LABELS.get(provider, provider)} ({summary.get('model')})"
        out.append(f'<text x="{x0 + g * group + group / 2:.1f}" y="{y0 + 18}" font-size="12" '
                   f'text-anchor="middle">{escape(name)}</text>')
    for n, (_, label, color) in enumerate(_BARS):  # two legend rows of two: the labels are long
        lx, ly = x0 + (n % 2) * (x1 - x0) / 2, _HEIGHT - 30 + (n // 2) * 16
        out.append(f'<rect x="{lx:.0f}" y="{ly}" width="12" height="12" fill="{color}"/>'
                   f'<text x="{lx + 16:.0f}" y="{ly + 10}" font-size="11">{escape(label)}</text>')
    out.append(f'<line x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}" stroke="#555"/>')
    out.append("</svg>")
    return "".join(out)


def cumulative_bill_plot(series: Sequence[Mapping[str, Any]], provider: str) -> str:
    """One session's input bill so far, turn by turn, at ``provider``'s rates.

    Three lines: the view with caching, the same views with every token fresh, and the unmanaged history with
    caching (units of one fresh input token).
    """
    points: list[tuple[float, float, float]] = []
    view = fresh = unmanaged = 0.0
    for t in series:
        b, u = (t.get("bill") or {}).get(provider), (t.get("bill_unmanaged") or {}).get(provider)
        if b is None or u is None:
            continue
        view += float(b["units"])
        fresh += float(b["read"] + b["write"] + b["fresh"])
        unmanaged += float(u["units"])
        points.append((view, fresh, unmanaged))
    if len(points) < 2:
        return ""
    x0, x1, y0, y1 = _LEFT + 14, _WIDTH - _RIGHT, _HEIGHT - 40, 50
    top = nice_ticks(max(max(p) for p in points), 4)[-1]

    def xy(i: int, v: float) -> str:
        return f"{x0 + (x1 - x0) * i / (len(points) - 1):.1f},{y0 - (y0 - y1) * v / top:.1f}"

    label = _PROVIDER_LABELS.get(provider, provider)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {_WIDTH} {_HEIGHT}" width="{_WIDTH}" '
        f'height="{_HEIGHT}" role="img" aria-label="cumulative input bill at {escape(label)}" '
        'font-family="system-ui, sans-serif">',
        f'<rect x="0" y="0" width="{_WIDTH}" height="{_HEIGHT}" fill="#ffffff"/>',
    ]
    for tick in nice_ticks(top, 4):
        yy = y0 - (y0 - y1) * tick / top
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e6e6e6"/>'
                   f'<text x="{x0 - 8}" y="{yy + 4:.1f}" font-size="11" text-anchor="end">{round(tick):,}</text>')
    lines = (("unmanaged history, with caching", 2, "#5f5f5f"), ("contextfold, every token fresh", 1, "#9cc0ec"),
             ("contextfold, with caching", 0, "#1f6fd1"))
    for name, k, color in lines:
        pts = " ".join(xy(i, p[k]) for i, p in enumerate(points))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2">'
                   f"<title>{escape(name)}: {round(points[-1][k]):,} units at the last call</title></polyline>")
    legend_x = x0
    out.append(f'<text x="{x0}" y="16" font-size="12" fill="#333">Input bill so far at {escape(label)}, in fresh '
               "input tokens</text>")
    for name, _, color in reversed(lines):
        out.append(f'<rect x="{legend_x}" y="24" width="12" height="12" fill="{color}"/>'
                   f'<text x="{legend_x + 16}" y="34" font-size="11">{escape(name)}</text>')
        legend_x += 16 + 6 * len(name) + 14
    out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{_HEIGHT - 4}" font-size="12" text-anchor="middle">model call'
               "</text>")
    out.append("</svg>")
    return "".join(out)
