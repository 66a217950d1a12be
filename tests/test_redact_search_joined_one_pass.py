"""Texts joined and searched for several needles in one automaton pass find the texts the per-needle search finds.

Issue 22 (cold compaction): the texts a batch's prefilter cleared are searched for every remembered secret
(``MessageRedactor._remembered_in``), one ``str.find`` pass over all of them per secret (~15 passes over ~6 MB).
A long ASCII joined text is now read once by an automaton of all the needles (``_ledger.search_joined``), and the
ASCII texts are joined apart from the others. Both must find exactly the texts holding a needle.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact import Redactor, _ledger
from contextfold.redact._ledger import SEPARATOR, joined_starts, search_joined
from contextfold.redact._messages import MessageRedactor
from contextfold.redact._triggers import automaton_available

pytestmark = pytest.mark.skipif(not automaton_available(),
                                reason="the automaton is the optional extra contextfold[fast]")

_NEEDLES = ["hunter2x", "s3cr3t", "ab", "aba", "bab", "sésame", "pw9"]
_text = st.lists(st.sampled_from([*_NEEDLES, "a", "b", "x", " ", "é", "\n"]), max_size=12).map("".join)


def _plain(texts: list[str], needles: tuple[str, ...]) -> set[int]:
    return {i for i, text in enumerate(texts) if any(needle in text for needle in needles)}


@settings(max_examples=80, deadline=None)
@given(st.lists(_text, min_size=1, max_size=12), st.lists(st.sampled_from(_NEEDLES), min_size=1, max_size=4,
                                                          unique=True))
def test_one_pass_finds_every_text_holding_a_needle(texts: list[str], needles: list[str]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_ledger, "_ONE_PASS_MIN_CHARS", 0)  # (every joined text read in one pass)
        found: set[int] = set()
        search_joined(SEPARATOR.join(texts), joined_starts(texts), tuple(needles), found)
        assert found == _plain(texts, tuple(needles))

        redactor = Redactor(remember=True)
        for needle in needles:
            redactor.memory.learn(needle, "test")
        remembered = MessageRedactor(redactor)._remembered_in(texts)
        assert remembered is not None
        assert remembered == _plain(texts, tuple(redactor._learned))


def test_the_needles_are_not_kept_after_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    # (the needles are a session's remembered secrets: a process-wide cache of automata would hold them past it)
    monkeypatch.setattr(_ledger, "_ONE_PASS_MIN_CHARS", 0)
    needles = tuple(f"{word}-{id(object())}" for word in ("k7q-secret", "k7q-other"))
    texts = ["plain text", f"holds {needles[1]} here"]
    before = sys.getrefcount(needles), [sys.getrefcount(n) for n in needles]
    found: set[int] = set()
    search_joined(SEPARATOR.join(texts), joined_starts(texts), needles, found)
    assert found == {1}
    assert (sys.getrefcount(needles), [sys.getrefcount(n) for n in needles]) == before
