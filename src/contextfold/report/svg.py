"""The tokens-per-turn plot as inline SVG: raw history vs the view, the window and thresholds, and what was done.

No JavaScript and no external resources: the SVG is text inside the report. Hovering a point shows its figures
through SVG ``<title>`` elements, which browsers render as tooltips.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

__all__ = ["PLOT_HEIGHT", "PLOT_WIDTH", "nice_ticks", "token_plot"]

PLOT_WIDTH = 960
PLOT_HEIGHT = 340
# Room for the y labels (up to "1,000,000"), the x labels and the legend above the plot area.
_LEFT, _RIGHT, _TOP, _BOTTOM = 78, 24, 40, 44
# When the raw history grows past this many windows, the axis stops there (the raw line is clipped and its peak
# written out): a linear axis up to 20× the window would squash the view and the thresholds into a flat line.
CLIP_WINDOWS = 2.5
# About this many gridlines on the y axis.
_TICKS = 5
# Colours for a white background, distinguishable with the common colour-vision deficiencies.
COLORS = {
    "raw": "#8a8a8a",
    "view": "#1f6fd1",
    "window": "#c62828",
    "hard": "#ef6c00",
    "soft": "#b59300",
    "compaction": "#7b1fa2",
    "masking": "#2e7d32",
    "invalid": "#c62828",
}


def nice_ticks(top: float, count: int = _TICKS) -> list[float]:
    """Round tick values from 0 to at least ``top``: steps of 1, 2 or 5 times a power of ten."""
    if top <= 0:
        return [0.0, 1.0]
    raw_step = top / count
    magnitude = 10 ** math.floor(math.log10(raw_step))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw_step)
    ticks = [0.0]
    while ticks[-1] < top:
        ticks.append(ticks[-1] + step)
    return ticks


def _fmt(value: float) -> str:
    return f"{round(value):,}"


class _Frame:
    """Maps turn numbers and token counts to SVG coordinates."""

    def __init__(self, turns: int, top: float) -> None:
        self.turns = max(1, turns)
        self.top = top
        self.x0, self.x1 = _LEFT, PLOT_WIDTH - _RIGHT
        self.y0, self.y1 = PLOT_HEIGHT - _BOTTOM, _TOP

    def x(self, i: int) -> float:
        if self.turns == 1:
            return (self.x0 + self.x1) / 2
        return self.x0 + (self.x1 - self.x0) * i / (self.turns - 1)

    def y(self, tokens: float) -> float:
        return self.y0 - (self.y0 - self.y1) * min(tokens, self.top) / self.top


def _line(points: Sequence[tuple[float, float]], color: str, width: float, dash: str = "") -> str:
    if not points:
        return ""
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<polyline fill="none" stroke="{color}" stroke-width="{width}"{dashed} '
            f'stroke-linejoin="round" points="{path}"/>')


def _hline(frame: _Frame, tokens: int, color: str, label: str, dash: str) -> str:
    y = frame.y(tokens)
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<line x1="{frame.x0}" x2="{frame.x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="{color}" stroke-width="1.5"'
        f"{dashed}/>"
        f'<text x="{frame.x1 - 4}" y="{y - 4:.1f}" text-anchor="end" fill="{color}" font-size="11">'
        f"{escape(label)} {_fmt(tokens)}</text>"
    )


def _axes(frame: _Frame, ticks: Sequence[float], turns: Sequence[int]) -> list[str]:
    out = []
    for t in ticks:
        if t > frame.top:
            break
        y = frame.y(t)
        out.append(f'<line x1="{frame.x0}" x2="{frame.x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{frame.x0 - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_fmt(t)}</text>')
    out.append(f'<line x1="{frame.x0}" x2="{frame.x0}" y1="{frame.y0}" y2="{frame.y1}" stroke="#444"/>')
    out.append(f'<line x1="{frame.x0}" x2="{frame.x1}" y1="{frame.y0}" y2="{frame.y0}" stroke="#444"/>')
    step = max(1, math.ceil(len(turns) / 12))
    for i in range(0, len(turns), step):
        x = frame.x(i)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.y0}" y2="{frame.y0 + 4}" stroke="#444"/>')
        out.append(f'<text x="{x:.1f}" y="{frame.y0 + 16}" text-anchor="middle" font-size="11">{i + 1}</text>')
    mid = (frame.x0 + frame.x1) / 2
    out.append(f'<text x="{mid:.1f}" y="{PLOT_HEIGHT - 8}" text-anchor="middle" font-size="12">'
               "model call (assistant turn)</text>")
    out.append(f'<text x="14" y="{(frame.y0 + frame.y1) / 2:.1f}" text-anchor="middle" font-size="12" '
               f'transform="rotate(-90 14 {(frame.y0 + frame.y1) / 2:.1f})">tokens</text>')
    return out


def _legend() -> str:
    items = [("raw history", "raw", "line"), ("view sent", "view", "line"), ("window", "window", "line"),
             ("hard", "hard", "dash"), ("soft", "soft", "dash"), ("compaction", "compaction", "bar"),
             ("masking", "masking", "tri"), ("invalid view", "invalid", "cross")]
    out: list[str] = []
    x = float(_LEFT)
    for label, key, shape in items:
        c = COLORS[key]
        if shape == "bar":
            out.append(f'<line x1="{x + 9}" x2="{x + 9}" y1="8" y2="22" stroke="{c}" stroke-width="2"/>')
        elif shape == "tri":
            out.append(f'<path d="M{x + 4},20 L{x + 9},11 L{x + 14},20 Z" fill="{c}"/>')
        elif shape == "cross":
            out.append(f'<path d="M{x + 4},10 L{x + 14},20 M{x + 14},10 L{x + 4},20" stroke="{c}" stroke-width="2"/>')
        else:
            dash = ' stroke-dasharray="6 4"' if shape == "dash" else ""
            out.append(f'<line x1="{x}" x2="{x + 18}" y1="15" y2="15" stroke="{c}" stroke-width="2.5"{dash}/>')
        out.append(f'<text x="{x + 22}" y="19" font-size="11">{label}</text>')
        x += 36 + 6.4 * len(label)
    return "".join(out)


def _point_title(t: Mapping[str, Any]) -> str:
    status = "valid" if t["valid"] else f"INVALID: {t['error']}"
    return escape(f"message {t['turn']}: raw {t['raw_tokens']:,} tokens, view {t['view_tokens']:,} tokens "
                  f"({t['view_messages']} messages), {t['compactions']} compactions, {t['maskings']} maskings, "
                  f"prepare {t['prepare_ms']:.1f} ms, {status}")


def token_plot(series: Sequence[Mapping[str, Any]], thresholds: Mapping[str, int] | None, *, label: str = "") -> str:
    """The plot of one session's ``series`` (the replay JSON's per-turn entries) as an ``<svg>`` element."""
    thresholds = thresholds or {}
    window = int(thresholds.get("window", 0))
    peak_raw = max((t["raw_tokens"] for t in series), default=0)
    peak_view = max((t["view_tokens"] for t in series), default=0)
    top: float = max(peak_raw, peak_view, window, 1)
    clipped = bool(window) and peak_raw > CLIP_WINDOWS * window
    if clipped:
        top = max(int(CLIP_WINDOWS * window), peak_view)
    ticks = nice_ticks(top * 1.05)
    frame = _Frame(len(series), ticks[-1])
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {PLOT_WIDTH} {PLOT_HEIGHT}" '
        f'width="{PLOT_WIDTH}" height="{PLOT_HEIGHT}" role="img" aria-label="{escape(label or "tokens per turn")}" '
        'font-family="system-ui, sans-serif">',
        f'<rect x="0" y="0" width="{PLOT_WIDTH}" height="{PLOT_HEIGHT}" fill="#ffffff"/>',
        *_axes(frame, ticks, [t["turn"] for t in series]),
        _legend(),
    ]
    for key, dash in (("soft", "6 4"), ("hard", "6 4"), ("window", "")):
        if thresholds.get(key):
            out.append(_hline(frame, int(thresholds[key]), COLORS[key], key, dash))
    previous: Mapping[str, Any] | None = None
    for i, t in enumerate(series):
        x = frame.x(i)
        if previous is not None and t["compactions"] > previous["compactions"]:
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.y0}" y2="{frame.y1}" '
                       f'stroke="{COLORS["compaction"]}" stroke-width="2" opacity="0.75">'
                       f"<title>compaction before message {escape(str(t['turn']))}</title></line>")
        if t["maskings"] > (previous["maskings"] if previous is not None else 0):
            y = float(frame.y0 - 2)
            out.append(f'<path d="M{x - 6:.1f},{y:.1f} L{x:.1f},{y - 11:.1f} L{x + 6:.1f},{y:.1f} Z" '
                       f'fill="{COLORS["masking"]}"><title>masking before message {escape(str(t["turn"]))}'
                       "</title></path>")
        previous = t
    out.append(_line([(frame.x(i), frame.y(t["raw_tokens"])) for i, t in enumerate(series)], COLORS["raw"], 2))
    out.append(_line([(frame.x(i), frame.y(t["view_tokens"])) for i, t in enumerate(series)], COLORS["view"], 2.5))
    for i, t in enumerate(series):
        x, y = frame.x(i), frame.y(t["view_tokens"])
        if t["valid"]:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{COLORS["view"]}">'
                       f"<title>{_point_title(t)}</title></circle>")
        else:
            out.append(f'<path d="M{x - 5:.1f},{y - 5:.1f} L{x + 5:.1f},{y + 5:.1f} M{x + 5:.1f},{y - 5:.1f} '
                       f'L{x - 5:.1f},{y + 5:.1f}" stroke="{COLORS["invalid"]}" stroke-width="2.5">'
                       f"<title>{_point_title(t)}</title></path>")
    if clipped:
        out.append(f'<text x="{frame.x0 + 8}" y="{frame.y1 + 14}" font-size="11" fill="{COLORS["raw"]}">'
                   f"raw history off scale above {_fmt(frame.top)}: peaks at {_fmt(peak_raw)} tokens</text>")
    out.append("</svg>")
    return "".join(out)
