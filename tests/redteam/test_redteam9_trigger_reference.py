"""The trigger finder with repetitive triggers kept out of the automaton answers as plain ``in`` does (review9).

Attacks ahead9's one-character-run change: triggers that repeat themselves (``aaaa``, ``abab``) are looked for with
``in`` beside the automaton. Over a two- or three-letter alphabet most triggers and texts are runs and repeats, and
every way the finder is asked (present, read, holds_any, positions over a batch) must agree with the reference.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact._triggers import TriggerFinder

_WORDS = st.text("ab-", min_size=1, max_size=6)
_TEXTS = st.text("ab-\x00", max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.lists(_WORDS, min_size=1, max_size=6), st.lists(st.text("ab-", max_size=40), min_size=1, max_size=5),
       st.booleans())
def test_every_question_agrees_with_in(triggers: list[str], texts: list[str], one_pass: bool) -> None:
    finder = TriggerFinder(triggers, one_pass=one_pass)
    for text in texts:
        expected = {t for t in set(triggers) if t in text}
        assert finder.present(text) == expected
        assert finder.holds_any(text) == bool(expected)
        read = finder.read(text)
        if read is not None:
            assert read[0] == expected
    batch = "\x00".join(texts)
    positions = finder.positions(batch)
    if positions is not None:
        start = 0
        for text in texts:
            end = start + len(text)
            if any(t in text for t in triggers):
                assert any(start <= p < end for p in positions), (text, positions)
            start = end + 1
