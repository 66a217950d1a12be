"""The outline's line pattern with possessive runs matches exactly the lines its plain form matches (issue 22).

The plain form tried every way to split a numbered listing's padding between its runs (~15 µs a line: ~150 ms for a
10,000-line listing cut at ``add()``); the possessive form gives nothing back. Both are asked, as ``_outline`` asks,
whether a line's first 200 characters match.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache._view import _OUTLINE

# The pattern before issue 22's change, the reference: same alternatives, plain (backtracking) runs.
PLAIN = re.compile(
    r"^\s*(?:\d+[\t :]+)?\s*(?:(?:async\s+)?def\s|class\s|(?:export\s+)?function\s|func\s|(?:pub\s+)?fn\s|"
    r"impl\s|interface\s|struct\s|@@\s|diff --git|\.\.\. eliding|Traceback|\w*(?:Error|Exception)\b|FAILED|ERROR)"
    r"|^[^\s:]+:\d+[:-]",
)

# Pieces lines are made of: the padding, numbers and separators the runs split, and every keyword's parts.
PIECES = (" ", "  ", "\t", ":", "-", "\r", "\x0b", "7", "42", "x", "_", ".", "/", "(", "async ", "def", "def ",
          "class ", "export ", "function ", "func ", "pub ", "fn ", "impl ", "interface ", "struct ", "@@ ", "@@",
          "diff --git", "... eliding", "Traceback", "Error", "Exception", "Key", "FAILED", "ERROR", "src/a.py",
          "é", "\u3000")

LINES = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)


@settings(max_examples=200, deadline=None)
@given(LINES)
def test_the_possessive_pattern_matches_the_lines_the_plain_one_matches(line: str) -> None:
    assert bool(_OUTLINE.match(line[:200])) == bool(PLAIN.match(line[:200])), line


def test_typical_lines() -> None:
    for line, hit in (("   769     def update(self, **kwargs):", True), ("12:    class Foo:", True),
                      ("src/app.py:42:    x = 1", True), ("    KeyError: 'name'", True), ("123Error", True),
                      ("12 34Error here", True), ("   12         value = compute(12)", False),
                      ("12 \r: def x", False), ("", False), ("  ... eliding lines 3-9 ...", True)):
        assert bool(_OUTLINE.match(line)) is hit, line
        assert bool(PLAIN.match(line)) is hit, line
