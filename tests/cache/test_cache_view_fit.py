"""A view's head and tail are fitted by running sums (issue 22, plain turns: a render fits them several times, and
each walk over the lines was most of re-rendering the answered output wider): the same lines as a walk, with the
same lines measured."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache._view import _CutLines
from contextfold.tokens import EstimatingCounter, TokenCounter


class _Counting:
    """A counter that records what it counted."""

    def __init__(self) -> None:
        self.inner = EstimatingCounter()
        self.counted: list[str] = []

    def count(self, text: str) -> int:
        self.counted.append(text)
        return self.inner.count(text)


def _walk(lines: _CutLines, order: range, byte_budget: int, token_budget: int,
          counter: TokenCounter) -> tuple[int, int, int]:
    """The walk the running sums replace: lines in order while both budgets hold, tokens counted once bytes fit."""
    taken = spent_bytes = spent_tokens = 0
    for i in order:
        _, nbytes, _ = lines.cost(i, None)
        if spent_bytes + nbytes > byte_budget:
            break
        _, _, ntokens = lines.cost(i, counter)
        if spent_tokens + ntokens > token_budget:
            break
        spent_bytes += nbytes
        spent_tokens += ntokens
        taken += 1
    return taken, spent_bytes, spent_tokens


_LINE = st.text(alphabet=st.sampled_from("ab é\t{}xyz0123"), max_size=40)
_FIT = st.tuples(st.booleans(), st.integers(0, 40), st.integers(0, 400), st.integers(0, 120))


@settings(max_examples=150, deadline=None)
@given(raw=st.lists(_LINE, max_size=30), fits=st.lists(_FIT, min_size=1, max_size=6))
def test_fit_takes_and_measures_what_a_walk_does(raw: list[str], fits: list[tuple[bool, int, int, int]]) -> None:
    summed, walked = _CutLines(raw, 24), _CutLines(raw, 24)
    sums_counter, walk_counter = _Counting(), _Counting()
    n = len(raw)
    for from_tail, most, byte_budget, token_budget in fits:  # (several fits of one render share the sums)
        order = range(n - 1, n - 1 - min(most, n), -1) if from_tail else range(min(most, n))
        assert summed.fit(from_tail, most, byte_budget, token_budget, sums_counter) == _walk(
            walked, order, byte_budget, token_budget, walk_counter)
        # No line is counted that the walks did not count (the first fit measures exactly what a walk does).
        assert set(sums_counter.counted) <= set(walk_counter.counted)
