"""A long session's secret memory must not stop learning at 4,096 strings: a secret found later leaked bare.

Found by the twelfth red team (a history ten times longer than a test's): each value a rule finds is remembered in
2 to 10 forms (itself, base64, URL, HTML, JSON escapes), and at 4,096 strings the memory learned nothing more, without
a word. 2,100 distinct API tokens (an agent's curl calls, a log's bearer headers) filled it; from then on
``password=NEW`` was still redacted where the rule matched, but ``the value was NEW`` went to the model, the archive
and every summary in clear (a manager fed 2,100 such requests sent NEW to the model). The memory now holds
16,384 strings and says once when it is full; past 1,024 strings every text is searched position by position, so a
large memory costs what the text's length costs (4,000 strings, 20,000-character text: 15.1 -> 2.8 ms).
"""

from __future__ import annotations

import logging
import random

import pytest

from contextfold.redact import MAX_LEARNED, Redactor, SecretMemory

NONCE = "rt12-memfull"
NEW = "Qz7Lk2Vb9Tn4Wp6Rs8Yd"
ALPHABET = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def _tokens(n: int) -> list[str]:
    rng = random.Random(12)
    return ["".join(rng.choice(ALPHABET) for _ in range(20)) for _ in range(n)]


def test_a_secret_found_after_thousands_of_others_is_redacted_where_it_is_repeated_bare() -> None:
    memory = SecretMemory()
    for token in _tokens(2_100):
        memory.learn(token, "api_token")
    assert len(memory) > 4_096
    redactor = Redactor(memory=memory)
    assert NEW not in redactor.redact_text(f"{NONCE}: now use password={NEW} for the db")
    assert NEW not in redactor.redact_text(f"{NONCE}: the value was {NEW}, right?")


def test_a_full_memory_says_so_once(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("contextfold.redact.memory.MAX_LEARNED", 100)
    memory = SecretMemory()
    with caplog.at_level(logging.WARNING, logger="contextfold.redact.memory"):
        for token in _tokens(80):
            memory.learn(token, "api_token")
    told = [r for r in caplog.records if "secret memory is full" in r.getMessage()]
    assert len(told) == 1
    assert len(memory) <= 100


def test_the_memory_holds_four_times_what_it_held() -> None:
    assert MAX_LEARNED >= 4 * 4_096
