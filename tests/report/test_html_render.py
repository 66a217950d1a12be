"""The HTML report: self-contained, escaped, and showing the figures, the plot's marks and the events."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.replay.metrics import TurnMetrics, aggregate, session_totals
from contextfold.report import ReportInputError, load_result, write_html
from contextfold.report.page import render_html
from contextfold.report.svg import CLIP_WINDOWS, nice_ticks, token_plot

SVG_NS = "{http://www.w3.org/2000/svg}"
THRESHOLDS = {"window": 16_000, "hard": 13_600, "soft": 8_160, "tool_output_budget": 8_160}


def _turn(turn: int, raw: int, view: int, **kw: object) -> dict:
    base: dict = dict(
        turn=turn, raw_tokens=raw, view_tokens=view, view_messages=turn, maskings=0, compactions=0,
        prepare_ms=0.5, valid=True, error=None, tokens_sent=0, tokens_sent_baseline=0, cached_tokens=0,
        output_tokens=10, cost_usd=0.01, cost_usd_cached=0.004, cost_usd_baseline=0.02,
    )
    base.update(kw)
    return TurnMetrics(**base).to_dict()


def _series() -> list[dict]:
    return [
        _turn(2, 3_000, 3_000, needed=2, in_view=2, recoverable=2),
        _turn(4, 9_000, 9_000, maskings=1),
        _turn(6, 14_000, 6_000, maskings=1, compactions=1, needed=4, in_view=3, recoverable=3,
              compacted_needed=2, compacted_recoverable=1, missing=("lost_identifier_name",)),
        _turn(8, 20_000, 7_000, maskings=1, compactions=1, valid=False, error="InvalidHistory: message 3: orphan"),
        _turn(10, 26_000, 9_500, maskings=1, compactions=1, tokens_sent=34_500, tokens_sent_baseline=72_000),
    ]


def _session(name: str, series: list[dict]) -> dict:
    return {
        "id": name, "source": "swe_agent", "format": "openai_chat", "messages": 11, "thresholds": THRESHOLDS,
        "series": series, "totals": session_totals(series),
        "events": [
            {"turn": 4, "name": "cache.masked", "status": "ok", "data": {"count": 2, "tokens_freed": 4100}},
            {"turn": 6, "name": "compact.summary_created", "status": "ok", "data": {"summary_tokens": 300}},
            {"turn": 8, "name": "compact.error", "status": "error", "data": {"message": "<boom> & co"}},
        ],
        "events_omitted": 5,
        "summaries": [{"turn": 6, "strategy": "task_state", "input_messages": 4, "input_tokens": 8000,
                       "summary_tokens": 300, "summary": "## Goal\nFix <b>the</b> bug in /testbed/a.py"}],
        "error": None,
    }


@pytest.fixture()
def result() -> dict:
    return aggregate([_session("django__django-1", _series()), _session("<script>alert(1)</script>", _series())],
                     {"model": "gpt-4o", "window": 16_000, "format": None, "summarizer": "extractive", "policy": {}})


def _svg(markup: str) -> ET.Element:
    return ET.fromstring(markup)


def test_plot_draws_both_lines_thresholds_and_marks() -> None:
    root = _svg(token_plot(_series(), THRESHOLDS))
    lines = root.findall(f"{SVG_NS}polyline")
    assert len(lines) == 2  # raw and view
    assert all(len(line.get("points", "").split()) == 5 for line in lines)
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG_NS}text"))
    for label in ("window 16,000", "hard 13,600", "soft 8,160", "model call"):
        assert label in texts
    titles = [t.text or "" for t in root.iter(f"{SVG_NS}title")]
    assert sum("compaction before message 6" in t for t in titles) == 1
    assert sum("masking before message 4" in t for t in titles) == 1
    assert sum("INVALID" in t for t in titles) == 1
    assert sum(t.startswith("message ") for t in titles) == 5  # one tooltip per call


def test_view_line_sits_below_raw_once_contextfold_acts() -> None:
    root = _svg(token_plot(_series(), THRESHOLDS))
    raw, view = ([float(p.split(",")[1]) for p in line.get("points", "").split()]
                 for line in root.findall(f"{SVG_NS}polyline"))
    assert raw[:2] == view[:2]  # identical while nothing was done
    assert all(v > r for r, v in zip(raw[2:], view[2:], strict=True))  # SVG y grows downwards


def test_raw_far_above_the_window_is_clipped_and_labelled() -> None:
    series = [_turn(2, 5_000, 5_000), _turn(4, 200_000, 12_000)]
    markup = token_plot(series, THRESHOLDS)
    assert "peaks at 200,000 tokens" in markup
    root = _svg(markup)
    ys = [float(p.split(",")[1]) for p in root.findall(f"{SVG_NS}polyline")[0].get("points", "").split()]
    assert min(ys) >= 40 - 0.5  # the clipped point stays inside the plot area
    # The axis stops near CLIP_WINDOWS windows (rounded up to a tick), far below the raw peak.
    top = int(re.search(r"off scale above ([\d,]+)", markup).group(1).replace(",", ""))
    assert CLIP_WINDOWS * 16_000 <= top < 200_000


@settings(max_examples=200)
@given(st.floats(min_value=1, max_value=1e9, allow_nan=False))
def test_nice_ticks_cover_the_range_in_round_steps(top: float) -> None:
    ticks = nice_ticks(top)
    assert ticks[0] == 0 and ticks[-1] >= top and len(ticks) <= 12
    step = ticks[1] - ticks[0]
    mantissa = step / 10 ** (len(str(int(step))) - 1) if step >= 1 else step
    assert round(mantissa, 6) in (1, 2, 5, 10) or step < 1


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls += [v or "" for k, v in attrs if k in ("src", "href", "action")]


def test_page_is_self_contained(result: dict) -> None:
    page = render_html(result)
    parser = _Collector()
    parser.feed(page)
    assert "script" not in parser.tags and "link" not in parser.tags and "img" not in parser.tags
    assert all(url.startswith("#") for url in parser.urls)  # only in-page anchors
    # The one absolute URL is the SVG namespace, which browsers never fetch.
    assert set(re.findall(r"https?://[^\s\"']+", page)) == {"http://www.w3.org/2000/svg"}
    assert parser.tags.count("svg") == 3  # the overview of the sessions, then one plot per session


def test_page_escapes_everything_from_the_recording(result: dict) -> None:
    page = render_html(result)
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Fix &lt;b&gt;the&lt;/b&gt; bug" in page and "&lt;boom&gt; &amp; co" in page


def test_page_shows_figures_costs_events_and_summaries(result: dict) -> None:
    page = render_html(result)
    for text in ("valid views", "80.0%", "needed-fact recall", "83.3%", "cost with prompt caching", "$0.0400",
                 "$0.1000", "cache.masked", "compact.summary_created", "5 token estimates",
                 "summary 1 before message 6", "lost_identifier_name", "InvalidHistory: message 3: orphan",
                 "recall of facts last seen before a compaction", "50.0%"):
        assert text in page, text
    assert page.count('class="bad"') >= 3  # the invalid turn row, the error event, the session rows


def test_write_html_and_load_result_round_trip(tmp_path: Path, result: dict) -> None:
    metrics = tmp_path / "m.json"
    metrics.write_text(json.dumps(result))
    out = write_html(load_result(metrics), tmp_path / "sub" / "r.html")
    assert out.read_text(encoding="utf-8") == render_html(result)
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]  # no temporary file left behind


@pytest.mark.parametrize(
    ("content", "message"),
    [("{", "invalid JSON"), ("[1]", "expected a JSON object"), ('{"sessions": 1}', "turns: missing"),
     (None, "per_session[0].series: missing")],
)
def test_bad_metrics_files_are_named(tmp_path: Path, result: dict, content: str | None, message: str) -> None:
    if content is None:
        del result["per_session"][0]["series"]
        content = json.dumps(result)
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(ReportInputError, match=re.escape(message)):
        load_result(path)


def test_events_table_lists_what_changed_the_view_and_counts_the_rest(result: dict) -> None:
    session = result["per_session"][0]
    session["events"] = [
        {"turn": 2, "name": "cache.truncated", "status": "ok", "data": {"ref": "r1", "bytes": 90_000}},
        *[{"turn": t, "name": "compact.trigger_decision", "status": "ok", "data": {"triggered": True}}
          for t in (4, 6)],
        {"turn": 4, "name": "cache.masked", "status": "ok", "data": {"count": 2, "tokens_freed": 4100}},
        {"turn": 6, "name": "compact.soft", "status": "ok", "data": {"applied": True}},
        {"turn": 6, "name": "compact.summary_created", "status": "ok", "data": {"summary_tokens": 300}},
        {"turn": 6, "name": "compact.pruned_messages", "status": "ok", "data": {"pruned_count": 4}},
        {"turn": 8, "name": "recovery.retry", "status": "ok", "data": {"attempt": 1, "action": "compact"}},
        {"turn": 8, "name": "compact.warning", "status": "ok", "data": {"message": "accuracy"}},
        {"turn": 9, "name": "compact.error", "status": "error", "data": {"message": "summarizer down"}},
    ]
    session["noop_decisions"] = 40
    page = render_html({**result, "per_session": [session]})
    table = page[page.index("<h3>Events</h3>"):]
    changes = re.findall(r"<tr(?: class=\"bad\")?><td class=\"n\">(\d+)</td><td>(\w+)</td>", table)
    assert changes == [("2", "truncated"), ("4", "masked"), ("6", "summarized"), ("6", "pruned"),
                       ("8", "recovered"), ("9", "error")]
    assert "42 trigger decisions" in table  # 2 sent (their changes are the rows) + 40 folded while tracing
    assert "1 <code>compact.soft</code>, 1 <code>compact.warning</code>" in table


def test_a_line_under_the_plot_explains_batching(result: dict) -> None:
    page = render_html({**result, "policy": {"clear_at_least": 3_000}})
    # soft is 8,160: calls 4 and 10 are over it; 4 masked, 10 had nothing done
    assert "The view sent was over the soft line (8,160 tokens) at 2 of 5 calls, 1 of them with nothing done" in page
    assert "at least 3,000 tokens at once" in page


def test_multi_session_report_opens_with_an_overview_and_a_sortable_table(result: dict) -> None:
    worse = _session("lossy-session", _series())
    worse["totals"] = {**worse["totals"], "needed_fact_recall": 0.25}
    result = {**result, "per_session": [*result["per_session"], worse]}
    page = render_html(result)
    overview = page[page.index("<h2>Sessions</h2>"):page.index("<h2>Per session</h2>")]
    scatter = _svg(overview[overview.index("<svg"):overview.index("</svg>") + 6])
    titles = [t.text or "" for t in scatter.iter(f"{SVG_NS}title")]
    assert len(titles) == 3 and any(t.startswith("lossy-session: 52.1% tokens saved, 25.0% needed-fact recall")
                                    for t in titles)
    # one table per sort order; the header of each column links to its order
    assert 'id="sessions-by-order"' in overview and 'href="#sessions-by-needed"' in overview
    by_needed = overview[overview.index('id="sessions-by-needed"'):]
    by_needed = by_needed[:by_needed.index("</table>")]
    order = re.findall(r'<a href="#s(\d+)">', by_needed)
    assert order[0] == "2"  # the lowest recall first
    by_calls = overview[overview.index('id="sessions-by-calls"'):]
    assert 'class="n sorted"' in by_calls[:by_calls.index("</thead>")]


def _billed_series() -> list[dict]:
    """Two calls billed at both reference providers: the view reads more of its cache than it saves in tokens."""
    def entry(read: int, write: int, fresh: int, read_ratio: float, write_ratio: float) -> dict:
        return {"read": read, "write": write, "fresh": fresh, "units": fresh + read * read_ratio + write * write_ratio}

    series = []
    for turn, (view, raw) in enumerate([(4_000, 4_000), (5_000, 9_000)], start=1):
        bill = {"openai": entry(view - 1_000, 0, 1_000, 0.5, 1.0), "anthropic": entry(0, view, 0, 0.1, 1.25)}
        unmanaged = {"openai": entry(raw - 500, 0, 500, 0.5, 1.0), "anthropic": entry(raw - 500, 500, 0, 0.1, 1.25)}
        series.append(_turn(turn, raw, view, bill=bill, bill_unmanaged=unmanaged))
    return series


def test_headline_and_plot_show_the_bill_with_prompt_caching(result: dict) -> None:
    billed = aggregate([_session("a", _billed_series())], {"model": "gpt-4o", "window": 16_000, "policy": {}})
    openai, anthropic = billed["bill"]["openai"], billed["bill"]["anthropic"]
    # OpenAI: (3,000*0.5+1,000) + (4,000*0.5+1,000) = 5,500 against (3,500*0.5+500) + (8,500*0.5+500) = 7,000.
    assert openai["ratio"] == pytest.approx(5_500 / 7_000, abs=1e-4)
    # Anthropic: the view wrote all it sent (11,250) against 3,500*0.1+625 + 8,500*0.1+625 = 2,450: 4.59x.
    assert anthropic["ratio"] == pytest.approx(11_250 / 2_450, abs=1e-4)
    page = render_html(billed)
    headline = page.split('<div class="cards">', 1)[1]
    first_cards = re.findall(r"<b>([^<]+)</b><span>([^<]+)</span>", headline)[:4]
    assert first_cards[0] == ("0.79×", "input bill with prompt caching vs unmanaged (OpenAI rates, gpt-4o): 21% saved")
    assert first_cards[2][0] == "4.59×" and "359% more" in first_cards[2][1]
    bars = _svg(re.search(r'<svg[^>]*aria-label="input bill with prompt caching[^"]*".*?</svg>', page,
                          re.S).group(0))  # type: ignore[union-attr]
    titles = [t.text or "" for t in bars.iter(f"{SVG_NS}title")]
    assert "contextfold, with caching: 0.79× (OpenAI rates)" in titles
    assert "unmanaged history, with caching (the 1.0× reference): 1.00× (Anthropic rates)" in titles
    assert "contextfold, every token fresh: 3.67× (Anthropic rates)" in titles  # 9,000 tokens / 2,450 units
    cumulative = _svg(re.search(r'<svg[^>]*aria-label="cumulative input bill at Anthropic rates".*?</svg>', page,
                                re.S).group(0))  # type: ignore[union-attr]
    lines = {(t.text or "").split(":")[0]: t.text for t in cumulative.iter(f"{SVG_NS}title")}
    assert lines["contextfold, with caching"] == "contextfold, with caching: 11,250 units at the last call"
    assert lines["unmanaged history, with caching"] == "unmanaged history, with caching: 2,450 units at the last call"
    assert "input bill with prompt caching vs unmanaged (anthropic rates)" in page
    # A replay JSON without bills (an older file) still renders, without the bill plots.
    assert "cumulative input bill" not in render_html(result)
