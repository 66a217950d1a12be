"""A text of one repeated character is scanned without a match per character (issue 22, ahead9).

``'A' * 1_000_000`` (base64 of zeros) holds the firebase key's head ``aaaa`` and the Twitter token's trigger
``a * 22`` at nearly every position: the automaton handed back ~2M overlapping matches, each looked at in Python
(674-713 ms against 310 before the heads joined the pass). Words that repeat themselves (a period of at most half their
length) are kept out of the automaton: a repetitive trigger is looked for with ``in``, a pattern with a repetitive
head searches the whole text, with the findings of the reference (each regex over the whole text).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact import Redactor, _triggers
from contextfold.redact._anchors import repetitive
from contextfold.redact._triggers import automaton_available

pytestmark = pytest.mark.skipif(not automaton_available(), reason="needs contextfold[fast] (ahocorasick-rs)")

_FIREBASE = "AAAAb1c2d3e:APA91b" + "Xy9_-" * 27
_TWITTER = "A" * 22 + "q8Zr%2FkLm9vNw3Ep7TuYb5Hc1Jd6Ks0Mx"


def test_repetitive_words() -> None:
    assert repetitive("aaaa") and repetitive("abab") and repetitive("abcabc") and repetitive("a" * 22)
    assert not repetitive("password") and not repetitive("abca") and not repetitive("-----begin")
    assert not repetitive("aab") and not repetitive("ab")


def test_a_run_of_one_character_gives_the_automaton_no_matches() -> None:
    redactor = Redactor()
    redactor.patterns
    finder = redactor._scanner.triggers
    assert not [w for w in finder._words if repetitive(w)]
    lowered = "a" * 20_000
    assert finder.read(lowered) == ({"a" * 22}, {})  # the Twitter trigger, found with `in`
    assert finder.present(lowered) == {"a" * 22}
    assert finder.holds_any(lowered)
    positions = finder.positions("x," + lowered)
    assert positions is not None and positions and min(positions) == 2


def _reference(monkeypatch: pytest.MonkeyPatch) -> Redactor:
    monkeypatch.setattr(_triggers, "_automaton", lambda triggers: None)
    redactor = Redactor()
    redactor.patterns
    assert not redactor._scanner.triggers.one_pass
    return redactor


@pytest.mark.parametrize("text", [
    "x" + "A" * 5_000,
    "A" * 3_000 + _FIREBASE + "A" * 3_000,
    "key: " + "A" * 400 + " " + _TWITTER + " " + "a" * 300 + _FIREBASE,
    ("ab" * 2_000) + " token=" + _TWITTER,
])
def test_runs_are_scanned_as_the_reference_scans_them(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = Redactor()
    expected = _reference(monkeypatch)._scanner.scan(text)
    assert fast._scanner.scan(text) == expected
    assert {f.name for f in expected} >= ({"twitter_token"} if _TWITTER in text else set())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["A" * 300, "a" * 40, "AAAA", ":APA91b", _FIREBASE, _TWITTER, "ab" * 50, " ",
                                 "password=", "hunter2hunter2", "\n"]), max_size=10).map("".join))
def test_runs_and_secrets_mixed(text: str) -> None:
    fast = Redactor()
    slow = Redactor()
    slow.patterns
    finder = slow._scanner.triggers
    finder._reader = finder._automaton = None  # (each trigger looked for in turn, no heads)
    finder.heads = ()
    assert fast._scanner.scan(text) == slow._scanner.scan(text)
