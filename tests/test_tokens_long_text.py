"""Very long texts are counted from samples (exact BPE over 10 MB took seconds), close to the exact count."""

from __future__ import annotations

import random
import string

from contextfold.tokens import TiktokenCounter
from contextfold.tokens.counting import EXACT_COUNT_MAX_CHARS


def prose(chars: int, seed: int) -> str:
    rng = random.Random(seed)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(2_000)]
    out: list[str] = []
    size = 0
    while size < chars:
        line = " ".join(rng.choices(words, k=12)) + ".\n"
        out.append(line)
        size += len(line)
    return "".join(out)[:chars]


def test_a_text_over_the_exact_limit_is_estimated_within_two_percent_and_never_under_by_much() -> None:
    counter = TiktokenCounter()
    text = prose(EXACT_COUNT_MAX_CHARS + 200_000, seed=3)
    exact = len(counter.encoding.encode_ordinary(text))
    estimate = counter.count(text)
    assert abs(estimate - exact) <= exact * 0.02, (estimate, exact)


def test_a_text_at_the_limit_is_counted_exactly() -> None:
    counter = TiktokenCounter()
    text = prose(EXACT_COUNT_MAX_CHARS, seed=4)
    assert counter.count(text) == len(counter.encoding.encode_ordinary(text))
