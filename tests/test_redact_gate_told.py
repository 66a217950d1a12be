"""The bulk prefilter tells its gate what it read of each text, and the gate decides as it would alone.

Issue 22 (cold compaction): the gate (``redact/_gate.py``) read every suspect again with the automaton and searched
it again for each need of the patterns without triggers, after the prefilter's own pass and searches. The prefilter
now hands it each text's read (triggers and heads) and the needs the text does not hold; the suspects must be the
same as when the gate reads and searches the text itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_redact_gate import _texts

from contextfold.redact import Redactor, _triggers
from contextfold.redact._gate import PatternGate
from contextfold.redact._triggers import automaton_available

_NONCE = "q7v3k"


def _suspects(redactor: Redactor, texts: list[str]) -> set[int]:
    found: set[int] = set()
    redactor._scanner.suspect_texts(texts, found)
    return found


class _Untold(PatternGate):
    def may_hold(self, text: str, lowered: str, read: Any = None, unmet: Any = ()) -> bool:
        return PatternGate.may_hold(self, text, lowered)  # (reads and searches the text itself)


_TOLD = Redactor(remember=False)
_TOLD.patterns  # (resolves the prefilter and the gate)
_ALONE = Redactor(remember=False)
_ALONE.patterns
_ALONE._scanner.gate.__class__ = _Untold


@settings(max_examples=100, deadline=None)
@given(st.lists(_texts, min_size=1, max_size=6))
def test_the_gate_told_what_the_prefilter_read_clears_the_same_texts(texts: list[str]) -> None:
    assert _suspects(_TOLD, texts) == _suspects(_ALONE, texts)


@pytest.mark.skipif(not automaton_available(), reason="the automaton is the optional extra contextfold[fast]")
def test_each_text_is_read_by_the_automaton_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Texts holding a trigger ("value", "key") and nothing a pattern can match: each a suspect the gate clears.
    texts = [f"the value of {_NONCE} {i} is the key of the dict\n" * 20 for i in range(30)]
    redactor = Redactor(remember=False)
    redactor.patterns
    calls = 0
    find = _triggers._find

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return find(*args, **kwargs)

    monkeypatch.setattr(_triggers, "_find", counted)
    assert _suspects(redactor, texts) == set()
    assert calls == len(texts)


@settings(max_examples=100, deadline=None)
@given(st.lists(_texts, min_size=2, max_size=8))
def test_short_texts_searched_joined_are_the_suspects_they_are_one_by_one(texts: list[str]) -> None:
    from contextfold.redact import _scanner

    joined = _suspects(_TOLD, texts)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_scanner, "_READ_JOINED_MAX_CHARS", 0)  # (every text read on its own)
        assert _suspects(_TOLD, texts) == joined
