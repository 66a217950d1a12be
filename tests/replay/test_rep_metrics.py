"""The figures a replay reports: bills, percentiles and aggregation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.billing import Bill
from contextfold.messages import Message, ToolCall
from contextfold.replay.metrics import (
    TurnMetrics,
    aggregate,
    bill_summary,
    contains_fact,
    is_number_fact,
    message_search_text,
    percentile,
    session_totals,
    turn_entities,
)


def test_bill_summary_compares_with_the_unmanaged_history_billed_with_caching() -> None:
    view = {"openai": Bill(requests=2, tokens=4_000, cache_read=2_000, cache_write=0, fresh=2_000, units=3_000.0),
            "anthropic": Bill(requests=2, tokens=4_000, cache_read=2_000, cache_write=2_000, fresh=0, units=2_700.0)}
    unmanaged = {"openai": Bill(requests=2, tokens=10_000, cache_read=8_000, cache_write=0, fresh=2_000,
                                units=6_000.0),
                 "anthropic": Bill(requests=2, tokens=10_000, cache_read=8_000, cache_write=2_000, fresh=0,
                                   units=3_300.0)}
    summary = bill_summary(view, unmanaged)
    openai, anthropic = summary["openai"], summary["anthropic"]
    assert (openai["model"], anthropic["model"]) == ("gpt-4o", "claude-sonnet-4")
    assert openai["ratio"] == 0.5 and openai["ratio_uncached"] == pytest.approx(4_000 / 6_000, abs=1e-4)
    assert openai["unmanaged_uncached"] == pytest.approx(10_000 / 6_000, abs=1e-4)
    assert anthropic["ratio"] == pytest.approx(2_700 / 3_300, abs=1e-4)
    assert (openai["hit_share"], openai["unmanaged_hit_share"]) == (0.5, 0.8)
    assert openai["view"]["usd"] == pytest.approx(3_000 * 2.5 / 1e6)
    assert anthropic["unmanaged"]["usd"] == pytest.approx(3_300 * 3.0 / 1e6)
    json.dumps(summary)


def test_turn_bills_add_up_per_session_and_across_sessions() -> None:
    entry = {"read": 1_000, "write": 200, "fresh": 50, "units": 1_000 * 0.1 + 200 * 1.25 + 50}
    cheap = {"read": 1_000, "write": 0, "fresh": 250, "units": 750.0}
    series = [_turn(1, bill={"anthropic": entry, "openai": cheap}, bill_unmanaged={"anthropic": entry}),
              _turn(2, bill={"anthropic": entry, "openai": cheap}, bill_unmanaged={"anthropic": entry})]
    totals = session_totals(series)
    assert totals["bill"]["anthropic"] == {"requests": 2, "tokens": 2_500, "cache_read": 2_000, "cache_write": 400,
                                           "fresh": 100, "units": 800.0, "usd": None}
    result = aggregate([_session("a", series), _session("b", series)], {})
    anthropic = result["bill"]["anthropic"]
    assert anthropic["view"]["tokens"] == 5_000 and anthropic["ratio"] == 1.0
    assert "openai" not in result["bill"]  # no unmanaged bill at that provider: nothing to compare with


@settings(max_examples=200)
@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=50),
       st.floats(min_value=0, max_value=100), st.floats(min_value=0, max_value=100))
def test_percentile_is_monotone_and_bounded(values: list[float], q1: float, q2: float) -> None:
    lo, hi = sorted((q1, q2))
    a, b = percentile(values, lo), percentile(values, hi)
    assert a is not None and b is not None
    assert min(values) <= a <= b + 1e-6 and b <= max(values)
    assert percentile(values, 0) == min(values) and percentile(values, 100) == max(values)


def test_percentile_of_nothing_is_none() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 3.0], 50) == 2.0


def _turn(turn: int, **kw: object) -> dict[str, object]:
    base: dict[str, object] = dict(
        turn=turn, raw_tokens=100 * turn, view_tokens=50 * turn, view_messages=turn, maskings=0, compactions=0,
        prepare_ms=1.0, valid=True, error=None, tokens_sent=0, tokens_sent_baseline=0, cached_tokens=0,
        output_tokens=10, cost_usd=0.01, cost_usd_cached=0.005, cost_usd_baseline=0.02,
    )
    base.update(kw)
    return TurnMetrics(**base).to_dict()  # type: ignore[arg-type]


def _session(name: str, series: list[dict[str, object]]) -> dict[str, object]:
    return {"id": name, "source": "swe_agent", "series": series, "totals": session_totals(series), "events": [],
            "summaries": [], "error": None}


def test_aggregate_adds_sessions_and_weights_recall_by_entity() -> None:
    a = _session("a", [_turn(1, needed=4, in_view=2, recoverable=4, tokens_sent=50, tokens_sent_baseline=100),
                       _turn(3, needed=0, valid=False, error="bad", tokens_sent=200, tokens_sent_baseline=400,
                             compactions=1, maskings=2, prepare_ms=9.0)])
    b = _session("b", [_turn(1, needed=6, in_view=6, recoverable=6, tokens_sent=10, tokens_sent_baseline=10,
                             cost_usd=None)])
    result = aggregate([a, b], {"model": "gpt-4o"})
    assert result["model"] == "gpt-4o"
    assert (result["sessions"], result["turns"], result["valid_turns"]) == (2, 3, 2)
    assert result["valid_rate"] == pytest.approx(2 / 3)
    assert result["needed_fact_recall"] == pytest.approx(8 / 10)
    assert result["recoverable_fact_recall"] == 1.0
    assert (result["tokens_sent"], result["tokens_sent_baseline"]) == (210, 410)
    assert (result["compactions"], result["maskings"]) == (1, 2)
    assert result["cost_usd"] is None  # one call had no price: a partial sum would mislead
    assert result["cost_usd_cached"] == pytest.approx(0.015)
    assert result["prepare_ms_median"] == 1.0 and result["prepare_ms_p99"] == pytest.approx(8.84)
    assert result["compacted_fact_recall"] is None and result["policy_in_view"] is None
    json.dumps(result)  # the whole result is JSON


def test_aggregate_of_no_sessions_has_no_rates() -> None:
    result = aggregate([], {})
    assert result["sessions"] == 0 and result["valid_rate"] is None and result["prepare_ms_median"] is None


def test_bare_numbers_dates_and_codes_are_facts_and_match_as_whole_words() -> None:
    turn = Message.assistant(
        "Line 718 calls it; flight HAT170 on 2024-05-17 costs $1,240 and the card ends 4242.",
        [ToolCall("c", "view", '{"path": "/testbed/a.py", "view_range": [718, 749]}')],
    )
    facts = turn_entities(turn)
    assert {"718", "749", "HAT170", "2024-05-17", "4242", "/testbed/a.py", "1,240"} <= facts
    assert "240" not in facts  # the last group of $1,240 is not a number of its own
    assert all(is_number_fact(f) for f in ("718", "2024-05-17", "$1,240"))
    assert not is_number_fact("HAT170")
    # Whole words only: a number inside a longer number, an id inside a longer id, are not there.
    assert not contains_fact("lines 7180-7200", "718")
    assert not contains_fact("price 12.718", "718")
    assert not contains_fact("id HAT1700", "HAT170")
    assert contains_fact("see a.py:718: def f", "718")
    assert contains_fact("[718, 749]", "749")
    assert contains_fact("/testbed/a.py.", "/testbed/a.py")


def test_number_and_non_number_recall_are_reported_apart() -> None:
    series = [
        _turn(1, needed=4, in_view=3, needed_numbers=2, numbers_in_view=1, answered_in_view=True),
        _turn(2, needed=2, in_view=2, needed_numbers=0, numbers_in_view=0, answered_in_view=False),
    ]
    totals = session_totals(series)
    assert totals["number_recall"] == pytest.approx(1 / 2)
    assert totals["non_number_recall"] == pytest.approx(4 / 4)
    assert totals["answered_message_in_view"] == pytest.approx(1 / 2)
    result = aggregate([_session("a", series)], {})
    assert (result["number_recall"], result["non_number_recall"]) == (pytest.approx(0.5), pytest.approx(1.0))
    assert result["answered_message_in_view"] == pytest.approx(0.5)


def test_call_arguments_are_searched_as_the_model_wrote_them() -> None:
    # JSON escapes a newline as "\n": "print" right after it must still be a whole word of the call.
    call = ToolCall("c", "bash", json.dumps({"command": "cat <<EOF > r.py\nimport sys\nprint(sys.path)\nEOF"}))
    text = message_search_text(Message.assistant("", [call]))
    assert contains_fact(text, "print") and contains_fact(text, "sys.path")
    assert text.startswith("bash\ncommand: cat <<EOF > r.py\nimport sys\n")
    # Arguments that are not a JSON object are searched as they are.
    assert message_search_text(Message.assistant("", [ToolCall("c", "f", "not json")])) == "f not json"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["$", "1", "23", "456", "7,890", ",", ".", " ", "-", "a", "_", "[", "]", "\n", "12.5",
                                 "2024-05-17", "HAT170", "'x1y'", '"q 12"', "/a/b.py", ":"]), max_size=25))
def test_every_fact_taken_from_a_turn_is_found_in_that_turn(pieces: list[str]) -> None:
    # A fact the metric takes from a message but cannot find in it again would be a miss no view could avoid.
    turn = Message.assistant("".join(pieces))
    text = message_search_text(turn)
    assert [f for f in turn_entities(turn) if not contains_fact(text, f)] == []
