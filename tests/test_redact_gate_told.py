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
    redactor._suspect_texts(texts, found)
    return found


@settings(max_examples=300, deadline=None)
@given(st.lists(_texts, min_size=1, max_size=6))
def test_the_gate_told_what_the_prefilter_read_clears_the_same_texts(texts: list[str]) -> None:
    told = Redactor(remember=False)
    told.patterns  # (resolves the gate)
    alone = Redactor(remember=False)
    alone.patterns
    gate = alone._gate
    plain = PatternGate.may_hold

    class Untold(PatternGate):
        def may_hold(self, text: str, lowered: str, read: Any = None, unmet: Any = ()) -> bool:
            return plain(self, text, lowered)  # (reads and searches the text itself)

    gate.__class__ = Untold
    assert _suspects(told, texts) == _suspects(alone, texts)


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
