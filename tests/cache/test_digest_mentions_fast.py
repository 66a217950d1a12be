"""A digest's material read the fast way (issue 22) equals its specification: the whole-word mentions (an ASCII
output split by str.translate + str.split instead of the pattern) and the definitions of a numbered listing (found
from their keywords instead of trying the pattern at every line start)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache._digest import _DEFINITION, _WORD_SPLIT, _definitions, _mention_counts

_PIECES = st.sampled_from(["total_1", "total_10", "a.b", "x/y.py", "$5", "end.", "...", " ", "\t", "\n", ", ", "é",
                           "naïve", "-v", "3.5", "(", ")", "`", "=", "::", "\u00a0", "\u2028", "ß"])


def _plain(text: str) -> Counter[str]:
    counts = Counter(_WORD_SPLIT.split(text))
    for word in [word for word in counts if word.endswith(".")]:
        counts[word.rstrip(".")] += counts.pop(word)
    counts.pop("", None)  # (no item is the empty word)
    return counts


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join) | st.text(max_size=80))
def test_the_mention_counts_are_the_patterns_for_every_word(text: str) -> None:
    counts = _mention_counts(text)
    counts.pop("", None)
    assert counts == _plain(text)


_LISTING = st.sampled_from(["def", "class", "function", "func", "fn", "struct", "interface", "async", " ", "\t", "\n",
                            "\r", "12", "3", "foo", "_x", "x1", "\u0663", "\u00a0", "subclass", "undefined", "(", ":"])


def _definitions_plain(text: str) -> list[str]:
    return [f"{name}:{line}" for line, name in _DEFINITION.findall(text)]


@settings(max_examples=200, deadline=None)
@given(st.lists(_LISTING, max_size=16).map("".join))
def test_the_definitions_are_the_patterns_matches(text: str) -> None:
    assert _definitions(text) == _definitions_plain(text)


def test_the_definitions_of_a_numbered_listing() -> None:
    listing = "  10\tclass Parser:\n  11\t    async def parse(self):\n12 x def no\n  13   \n   def later\nfn main"
    assert _definitions(listing) == _definitions_plain(listing) == ["Parser:10", "parse:11", "later:13"]


def test_the_definitions_of_every_recorded_output_are_the_patterns_matches(trajectories: Path) -> None:
    from contextfold.importers import load_sessions

    outputs = [m.text for d in ("sweagent-lm32b", "sweagent-claude4sonnet")
               for s in load_sessions(trajectories / d) for m in s.messages if m.role in ("tool", "user")]
    assert sum(1 for text in outputs if _definitions_plain(text)) > 100
    assert all(_definitions(text) == _definitions_plain(text) for text in outputs)
