"""The triggers of a text found in one pass (issue 22): the same findings with the automaton as without it.

``ahocorasick-rs`` (``contextfold[fast]``) finds every trigger of a text at once; without it each is looked for in
turn. Both must let exactly the same patterns run, so the findings of every text are the same.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redact_corpus import CODE, SECRETS

from contextfold.messages import Message
from contextfold.redact import Redactor, _triggers
from contextfold.redact._triggers import TriggerFinder, automaton_available

_TEXTS = [item.text for item in (*SECRETS, *CODE)]


def _without_automaton(monkeypatch: pytest.MonkeyPatch) -> Redactor:
    monkeypatch.setattr(_triggers, "_automaton", lambda triggers: None)
    redactor = Redactor()
    redactor.patterns
    assert not redactor._scanner.triggers.one_pass
    return redactor


@pytest.mark.skipif(not automaton_available(), reason="needs contextfold[fast] (ahocorasick-rs)")
def test_the_automaton_finds_what_looking_in_turn_finds_in_the_corpora(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = Redactor()
    fast.patterns
    assert fast._scanner.triggers.one_pass
    slow = _without_automaton(monkeypatch)
    for text in _TEXTS:
        lowered = text.lower()
        assert fast._scanner.triggers.present(lowered) == slow._scanner.triggers.present(lowered), text
        assert fast._scanner.scan(text) == slow._scanner.scan(text), text
    batch = [Message.user(text) for text in _TEXTS]
    assert fast._message_redactor._suspects(batch) == slow._message_redactor._suspects(batch)


@pytest.mark.skipif(not automaton_available(), reason="needs contextfold[fast] (ahocorasick-rs)")
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["pass", "passw", "password", "key", "sk", "sk-", "ghp_", "eyj", "-us", "x", " ",
                                 "\n", "ſ", "İ", "é", "\udc00"]), max_size=12).map("".join))
def test_overlapping_and_nested_triggers_are_all_found(text: str) -> None:
    triggers = ["pass", "passw", "password", "key", "sk", "sk-", "ghp_", "eyj", "-us", "word"]
    fast, slow = TriggerFinder(triggers), TriggerFinder(triggers, one_pass=False)
    lowered = text.lower()
    assert fast.present(lowered) == slow.present(lowered) == {t for t in triggers if t in lowered}
    assert fast.holds_any(lowered) == slow.holds_any(lowered)
