"""An ASCII text is searched as bytes, with the same matches as the library's ``str`` search.

Issue 22 (cold compaction): ``ahocorasick_rs``'s ``str`` search maps each byte offset of the text to a character
offset on every call, half the cost of searching a tool output; ``redact/_triggers._Automaton`` hands an ASCII text's
bytes to the library's bytes search instead (the offsets are the same). Any other text goes to the ``str`` search.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact import Redactor
from contextfold.redact._triggers import _Automaton, automaton_available

pytestmark = pytest.mark.skipif(not automaton_available(),
                                reason="the automaton is the optional extra contextfold[fast]")

_REDACTOR = Redactor(remember=False)
_REDACTOR.patterns  # (resolves the finder)
_WORDS = _REDACTOR._scanner.triggers._words
_PIECES = [*_WORDS[:60], "x9_nonce", " ", "\n", "é", "ß", "\u212a", "ǅ", "passé"]
_TWIN = _Automaton(_WORDS) if automaton_available() else None


@settings(max_examples=120, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=12), max_size=25), st.booleans())
def test_the_bytes_search_of_an_ascii_text_finds_what_the_str_search_finds(pieces: list[str],
                                                                          overlapping: bool) -> None:
    assert _TWIN is not None
    text = "".join(pieces).lower()
    plain = _TWIN._text  # (the library's str search alone)
    try:
        expected = plain.find_matches_as_indexes(text, overlapping=overlapping)
    except UnicodeEncodeError:  # (a lone surrogate: the str search refuses it, and so does the twin)
        with pytest.raises(UnicodeEncodeError):
            _TWIN.find_matches_as_indexes(text, overlapping)
        return
    assert _TWIN.find_matches_as_indexes(text, overlapping) == expected
