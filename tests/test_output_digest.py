"""The digest a masked output's placeholder keeps: what it names, ranked, within its token budget."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache._digest import DIGEST_SEPARATOR, MAX_MISSES, output_digest
from contextfold.tokens import EstimatingCounter, TiktokenCounter

COUNTER = TiktokenCounter("o200k_base")

LISTING = "\n".join([
    "Here is the result of running `cat -n` on /testbed/django/db/models/query.py:",
    "   755\t    def _raw_delete(self, using):",
    "   756\t        return self.query.get_compiler(using).execute_sql(CURSOR)",
    "   757\t",
    "   769\t    def update(self, **kwargs):",
    '   770\t        self._not_support_combined_queries("update")',
    "   771\t        return self.update(**kwargs)",
])
RESERVATION = ('{"reservation_id": "ZFA04Y", "flights": [{"flight_number": "HAT227", "price": 1121, '
               '"date": "2024-05-24"}], "total": 2544}')


def test_a_listing_keeps_its_definitions_with_their_line_numbers_first() -> None:
    # The call read that path: it stays in view beside the placeholder, so the digest does not repeat it.
    digest = output_digest(LISTING, budget_tokens=24, counter=COUNTER,
                           known='{"path": "/testbed/django/db/models/query.py"}')
    assert digest == "update:769, _raw_delete:755, CURSOR, self.query.get_compiler, self.update"


def test_without_the_call_the_path_is_kept() -> None:
    digest = output_digest(LISTING, budget_tokens=24, counter=COUNTER)
    assert digest == "update:769, _raw_delete:755, /testbed/django/db/models/query.py, CURSOR"


def test_json_keeps_ids_codes_dates_and_bare_numbers_within_the_budget() -> None:
    assert output_digest(RESERVATION, budget_tokens=24, counter=COUNTER) == "ZFA04Y, HAT227, 2024-05-24, 1121"
    assert output_digest(RESERVATION, budget_tokens=8, counter=COUNTER) == "ZFA04Y, 1121"


def test_nothing_for_a_zero_budget_or_an_empty_output() -> None:
    assert output_digest(RESERVATION, budget_tokens=0, counter=COUNTER) == ""
    assert output_digest("", budget_tokens=24, counter=COUNTER) == ""
    assert output_digest("ok", budget_tokens=24, counter=COUNTER) == ""


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=2_000), budget=st.integers(0, 64))
def test_a_digest_fits_its_budget_and_only_quotes_the_output(text: str, budget: int) -> None:
    digest = output_digest(text, budget_tokens=budget, counter=COUNTER)
    assert COUNTER.count(digest) <= budget
    for item in digest.split(DIGEST_SEPARATOR) if digest else []:
        name = item.rsplit(":", 1)[0] if ":" in item and item.rsplit(":", 1)[1].isdigit() else item
        assert name in text
    assert digest == output_digest(text, budget_tokens=budget, counter=COUNTER)  # deterministic


def _walked(material: list[str], budget: int, counter: Any, allow: Any) -> str:
    """The digest's walk without its early end (issue 22): every item until MAX_MISSES misses or the last."""
    items: list[str] = []
    spent = misses = 0
    separator = counter.count(DIGEST_SEPARATOR)
    for value in material:
        if not allow(value):
            continue
        cost = counter.count(value) + (separator if items else 0)
        if spent + cost > budget:
            misses += 1
            if misses >= MAX_MISSES:
                break
            continue
        items.append(value)
        spent += cost
    return DIGEST_SEPARATOR.join(items)


def test_a_full_digest_asks_about_no_further_item() -> None:
    # Items of one token each: once the budget is spent, not even the shortest can fit (issue 22: the walk went on
    # asking the secrets about, and counting, up to MAX_MISSES more).
    material = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    asked: list[str] = []

    def allow(item: str) -> bool:
        asked.append(item)
        return True

    digest = output_digest("", budget_tokens=7, counter=COUNTER, material=material, allow=allow)
    assert digest == "one, two, three"  # (1 + 3 + 3 tokens: the separator is two)
    assert asked == ["one", "two", "three"]


@settings(max_examples=150, deadline=None)
@given(material=st.lists(st.text(min_size=1, max_size=12) | st.sampled_from(["a", "ok", "1", "x_y", "AKIA"]),
                         max_size=40, unique=True),
       budget=st.integers(1, 30), denied=st.sets(st.integers(0, 39)),
       counter=st.sampled_from([COUNTER, EstimatingCounter(), EstimatingCounter(1.5)]))
def test_the_early_end_writes_the_digest_the_whole_walk_does(material: list[str], budget: int, denied: set[int],
                                                             counter: Any) -> None:
    def allow(item: str) -> bool:
        return material.index(item) not in denied

    assert output_digest("", budget_tokens=budget, counter=counter, material=material, allow=allow) == \
        _walked(material, budget, counter, allow)
