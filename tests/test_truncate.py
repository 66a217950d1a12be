"""Head/tail truncation: within budget, head and tail kept, the marker states what was removed."""

from __future__ import annotations

import re

import pytest
from conftest import TRAJECTORIES, require
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.tokens import EstimatingCounter, TiktokenCounter
from contextfold.truncate import SERIALIZATION_BUFFER, truncate_text
from contextfold.truncate._text import cap_lines, line_count

O200K = TiktokenCounter("o200k_base")
MARKER = re.compile(r"…(\d+) (tokens|chars) truncated…")

# Text without the marker's ellipsis, so that the marker can be found unambiguously; wide characters and line
# breaks included because those are where splitting goes wrong.
ALPHABET = st.characters(blacklist_characters="…", blacklist_categories=("Cs",))
texts = st.text(alphabet=ALPHABET, min_size=0, max_size=600) | st.lists(
    st.sampled_from(["hello ", "wörld ", "日本語", "🙂", "\n", "\r\n", "    ", "x" * 50, "<|endoftext|>", "é"]),
    max_size=150,
).map("".join)


def byte_len(text: str) -> int:
    return len(text.encode("utf-8"))


def split_on_marker(text: str, header: str = "") -> tuple[str, int, str]:
    assert text.startswith(header)
    body = text[len(header) :]
    found = list(MARKER.finditer(body))
    assert len(found) == 1, body
    m = found[0]
    return body[: m.start()], int(m.group(1)), body[m.end() :]


@settings(max_examples=150, deadline=None)
@given(texts, st.data(), st.floats(min_value=0.0, max_value=1.0))
def test_token_truncation_fits_keeps_head_and_tail_and_states_the_count(
    text: str, data: st.DataObject, ratio: float
) -> None:
    # Budgets up to a little over the text's own size, so that most examples truncate and some fit.
    size = O200K.count(text)
    # A marker takes ~8 tokens: most budgets leave room for one, a few do not.
    budget = data.draw(st.integers(0, 12) | st.integers(12, max(12, int(size * 1.3))), label="budget")
    result = truncate_text(text, budget, head_ratio=ratio, counter=O200K, max_line_length=None)
    limit = int(budget / SERIALIZATION_BUFFER)
    assert O200K.count(result.text) <= limit <= budget
    assert result.total_lines == line_count(text)
    if not result.was_truncated:
        assert result.text == text and result.truncated_units == 0
        return
    assert O200K.count(text) > limit
    if not result.text:
        return  # the budget cannot even hold the marker
    head, stated, tail = split_on_marker(result.text)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + len(tail) < len(text)
    assert stated == result.truncated_units == O200K.count(text) - O200K.count(head) - O200K.count(tail)
    assert stated > 0


@settings(max_examples=150, deadline=None)
@given(texts, st.data(), st.floats(min_value=0.0, max_value=1.0), st.booleans())
def test_byte_truncation_fits_and_never_splits_a_character(
    text: str, data: st.DataObject, ratio: float, header: bool
) -> None:
    size = byte_len(text)
    budget = data.draw(st.integers(0, 40) | st.integers(40, max(40, int(size * 1.3))), label="budget")
    result = truncate_text(text, budget, unit="bytes", head_ratio=ratio, max_line_length=None, header=header)
    assert byte_len(result.text) <= int(budget / SERIALIZATION_BUFFER)
    result.text.encode("utf-8")  # whole characters only: a split surrogate or sequence would not encode
    if not result.was_truncated:
        assert result.text == text
        return
    if not result.text:
        return
    prefix = f"Total output lines: {line_count(text)}\n\n"
    has_header = header and result.text.startswith(prefix)
    head, stated, tail = split_on_marker(result.text, prefix if has_header else "")
    assert text.startswith(head) and text.endswith(tail)
    assert stated == result.truncated_units == len(text) - len(head) - len(tail)


@settings(max_examples=60, deadline=None)
@given(texts, st.integers(min_value=20, max_value=200))
def test_estimating_counter_works_too(text: str, budget: int) -> None:
    counter = EstimatingCounter(3.0)
    result = truncate_text(text, budget, counter=counter, serialization_buffer=1.0, max_line_length=None)
    assert counter.count(result.text) <= budget


@given(st.text(alphabet=ALPHABET, max_size=3000), st.integers(min_value=1, max_value=200))
def test_line_cap_bounds_every_line(text: str, cap: int) -> None:
    capped, n = cap_lines(text, cap)
    for line in capped.split("\n"):
        body = MARKER.sub("", line.rstrip("\r"))
        assert len(body) <= cap
    assert n == sum(1 for line in text.split("\n") if len(line.rstrip("\r")) > cap)
    assert (capped == text) == (n == 0)


def test_nothing_happens_within_budget() -> None:
    text = "short output\nline two\n"
    result = truncate_text(text, 1000)
    assert result.text == text
    assert (result.truncated_units, result.total_lines, result.was_truncated) == (0, 2, False)


def test_long_lines_are_capped_even_within_budget() -> None:
    text = "ok\n" + "z" * 2_500 + "\r\nend"
    result = truncate_text(text, 100_000, unit="bytes")
    assert result.was_truncated and result.capped_lines == 1 and result.truncated_units == 0
    assert result.text == "ok\n" + "z" * 2_000 + "…500 chars truncated…\r\nend"


def test_header_states_the_original_line_count() -> None:
    text = "\n".join(f"line {i}" for i in range(1000))
    result = truncate_text(text, 200, header=True)
    assert result.text.startswith("Total output lines: 1000\n\nline 0\nline 1")
    assert result.text.endswith("line 998\nline 999")
    assert O200K.count(result.text) <= 200 / SERIALIZATION_BUFFER


def test_policy_none_returns_the_text_untouched() -> None:
    text = "x" * 10_000
    assert truncate_text(text, 10, unit="none") == truncate_text(text, 10, unit="none")
    assert truncate_text(text, 10, unit="none").text == text


def test_head_ratio_moves_the_split() -> None:
    text = "".join(f"{i:05d}\n" for i in range(5000))
    head_heavy = truncate_text(text, 300, unit="bytes", head_ratio=0.9, serialization_buffer=1.0)
    head, _, tail = split_on_marker(head_heavy.text)
    assert len(head) > 5 * len(tail)
    tail_only = truncate_text(text, 300, unit="bytes", head_ratio=0.0, serialization_buffer=1.0)
    head, _, tail = split_on_marker(tail_only.text)
    assert head == "" and tail.endswith("04999\n")


def test_tiny_budget_gives_an_empty_view() -> None:
    result = truncate_text("a" * 1000, 3, unit="bytes")
    assert result == truncate_text("a" * 1000, 3, unit="bytes")
    assert result.text == "" and result.was_truncated and result.truncated_units == 1000


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget": -1}, "budget: expected a non-negative integer"),
        ({"budget": 10, "unit": "lines"}, "unit: expected one of none, bytes, tokens"),
        ({"budget": 10, "head_ratio": 1.5}, r"head_ratio: expected a number in \[0, 1\]"),
        ({"budget": 10, "max_line_length": 0}, "max_line_length"),
        ({"budget": 10, "serialization_buffer": 0.5}, "serialization_buffer"),
    ],
)
def test_bad_parameters_name_the_field(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        truncate_text("text", **kwargs)  # type: ignore[arg-type]


def test_real_swe_agent_outputs_fit_a_10k_token_budget() -> None:
    require(TRAJECTORIES.is_dir(), f"shared data not found at {TRAJECTORIES}")
    import json

    from test_tokens import swe_agent_tool_outputs

    big = sorted(swe_agent_tool_outputs(), key=len)[-20:]
    assert big
    for text in big:
        result = truncate_text(text, 10_000, header=True)
        assert O200K.count(result.text) <= 10_000 / SERIALIZATION_BUFFER
        if result.was_truncated and result.truncated_units:
            assert result.text.startswith(f"Total output lines: {line_count(text)}")
        json.dumps(result.text)
