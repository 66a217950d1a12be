"""``Redactor.mentions_secret`` keeps its answers across a secret learned (issue 22: the masking turn after one asked
every word of its digests again, the heaviest masking turns of the lm32b loop). A "yes" stands; a "no" stands when
none of the strings learned since occurs in the word or shares a piece with it. The answers are those of a redactor
asked afresh, whatever was learned in between."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact import Redactor
from contextfold.redact import _redactor as redactor_module

_ALPHABET = "abcdefXYZ0123_-/."
_words = st.text(_ALPHABET, min_size=1, max_size=24)
_secrets = st.text(_ALPHABET, min_size=8, max_size=30)


@settings(max_examples=20, deadline=None)
@given(words=st.lists(_words, min_size=1, max_size=12), batches=st.lists(st.lists(_secrets, max_size=3), max_size=3))
def test_answers_carried_over_a_learned_secret_are_those_of_a_fresh_redactor(words: list[str],
                                                                             batches: list[list[str]]) -> None:
    carried = Redactor()
    for n, batch in enumerate(batches):
        for word in words:
            carried.mentions_secret(word)
        for secret in batch:
            carried.memory.learn(secret, "password")
        fresh = Redactor()
        for learned in [s for b in batches[: n + 1] for s in b]:
            fresh.memory.learn(learned, "password")
        assert [carried.mentions_secret(w) for w in words] == [fresh.mentions_secret(w) for w in words]


def test_a_word_asked_before_a_secret_is_learned_is_not_scanned_again(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    nonce = uuid.uuid4().hex[:10]
    redactor = Redactor()
    words = [f"load_{nonce}_{n}" for n in range(20)]
    assert not any(redactor.mentions_secret(w) for w in words)
    other = "".join("ghijklmnopqrstuvwxyz"[int(c, 16)] for c in nonce)  # (no piece in common with the words)
    redactor.memory.learn(f"Hunter2-PASSPHRASE-{other}", "password")
    scanned: list[str] = []
    spans = redactor_module.Redactor.spans
    monkeypatch.setattr(redactor_module.Redactor, "spans", lambda self, text: scanned.append(text) or spans(self, text))
    assert not any(redactor.mentions_secret(w) for w in words)
    assert scanned == []
    # A word that shares a piece with the new secret is asked again, and now mentions it.
    assert redactor.mentions_secret(f"xx{other[:6]}yy")
