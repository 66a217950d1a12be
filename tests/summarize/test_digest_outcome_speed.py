"""The outcome-line pattern was rewritten for speed: it must say yes to exactly the same lines as before."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.summarize.digest import _OUTCOME

# The pattern as it was (quadratic in the length of each word: it rescanned \w* from every word start).
_BEFORE = re.compile(
    r"(\b\w*(?:Error|Exception)\b|\bTraceback\b|\bFAILED\b|\bfailed\b|\bpassed\b|\berror:|\bERROR\b|"
    r"\bsucceeded\b|\bSuccess\b|^OK\b|exit code|returned non-zero|No such file|not found|Permission denied)",
    re.MULTILINE,
)

_PIECES = st.sampled_from(["Error", "Exception", "Value", "x", "_", " ", ".", "-", "é", "1", "OK", "failed", ":",
                           "ERROR", "error", "\n", "Errors", "MyError", "(", "Traceback", "not found"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_the_faster_outcome_pattern_accepts_exactly_the_lines_the_old_one_did(line: str) -> None:
    assert (_OUTCOME.search(line) is None) == (_BEFORE.search(line) is None)


def test_examples() -> None:
    for line in ("ValueError: bad", "raise MyException()", "x=Error", "2 passed", "exit code 1"):
        assert _OUTCOME.search(line)
    for line in ("Errors were fixed", "ErrorHandler", "all good"):
        assert not _OUTCOME.search(line)
