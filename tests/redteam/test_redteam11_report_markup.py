"""A replay JSON from elsewhere cannot put markup into the HTML report ``contextfold report`` writes from it.

Found by a sweep (red team, session 11): each of the 213 leaf fields of a real replay JSON (every item of a list at
once) set to ``<script>…</script>`` and rendered; one came out as markup. A series item's ``turn`` went unescaped
into the plot's ``<title>`` of a compaction or masking mark, so a metrics file someone shared (``replay --json``,
hand-edited) ran its script in the browser of whoever rendered and opened its report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.cli import main
from contextfold.replay.metrics import TurnMetrics, aggregate, session_totals

MARKUP = "</title><script>alert('rt11-report-3e5f')</script>"


def _turn(turn: int, raw: int, view: int, **kw: object) -> dict:
    base: dict = dict(turn=turn, raw_tokens=raw, view_tokens=view, view_messages=turn, maskings=0, compactions=0,
                      prepare_ms=0.5, valid=True, error=None, tokens_sent=0, tokens_sent_baseline=0, cached_tokens=0,
                      output_tokens=10, cost_usd=0.01, cost_usd_cached=0.004, cost_usd_baseline=0.02)
    base.update(kw)
    return TurnMetrics(**base).to_dict()


def test_a_turn_that_is_markup_stays_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    series = [_turn(2, 3_000, 3_000), _turn(4, 9_000, 9_000, maskings=1),
              _turn(6, 14_000, 6_000, maskings=1, compactions=1)]
    session = {"id": "s", "source": "jsonl", "format": "openai_chat", "messages": 7,
               "thresholds": {"window": 16_000, "hard": 13_600, "soft": 8_160}, "series": series,
               "totals": session_totals(series), "events": [], "events_omitted": 0, "summaries": [], "error": None}
    result = aggregate([session], {"model": "gpt-4o", "window": 16_000, "format": None, "summarizer": "extractive",
                                   "policy": {}})
    for item in result["per_session"][0]["series"]:
        item["turn"] = MARKUP
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps(result))
    out = tmp_path / "report.html"
    code = main(["report", str(metrics), "-o", str(out)])
    capsys.readouterr()
    assert code in (0, 2)  # rendered with the text escaped, or refused as not a replay JSON
    if code == 0:
        page = out.read_text()
        assert "<script>alert(" not in page
        assert "&lt;script&gt;alert(" in page
