"""``mentions_secret`` answers as a redactor asked afresh, whatever it answered before a secret was learned (red team,
eighth session; attacks the masking lane's carried answers: a "no" kept across a learned secret unless a string
learned since occurs in the word or shares a piece with it).

The words asked are what a digest lists after a secret is known in another form: the secret JSON-escaped,
URL-encoded, in base64, upper-cased, a piece of it, a piece run into other characters; the secret is learned bare
(``learn``) or found in context (``learn_text``: its remembered forms are made from the value as found). Hunted with
3,600 rounds and 600 generated cases against the masking lane's branch before it landed (0 differences); it fails
when a kept "no" ignores what was learned since. Committed at a modest size.
"""

from __future__ import annotations

import base64
import json
import urllib.parse

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact import Redactor

_ALPHABET = "abcdefXYZ0123_-/.+=%\"\\ éK"
_SECRETS = st.text(_ALPHABET, min_size=8, max_size=24)


def _teach(redactor: Redactor, secret: str, in_context: bool) -> None:
    if in_context:
        redactor.learn_text(f"password={json.dumps(secret)}")
    else:
        redactor.learn(secret, "password")


def _words_about(secret: str, cut: int) -> list[str]:
    return [json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe=""),
            base64.b64encode(secret.encode()).decode().rstrip("="), secret.upper(), secret,
            secret[cut % 4:][:5 + cut % 5], f"x{secret[2:9]}y"]


@settings(max_examples=10, deadline=None)
@given(st.lists(st.tuples(_SECRETS, st.booleans(), st.integers(0, 99)), min_size=1, max_size=3),
       st.lists(st.text(_ALPHABET, min_size=1, max_size=16), max_size=4))
def test_answers_kept_across_learned_secrets_are_those_of_a_fresh_redactor(
        secrets: list[tuple[str, bool, int]], others: list[str]) -> None:
    words = [w for secret, _, cut in secrets for w in _words_about(secret, cut)] + others
    carried = Redactor()
    for n, (secret, in_context, _) in enumerate(secrets):
        for word in words:
            carried.mentions_secret(word)  # (asked before the secret is known: answers kept)
        _teach(carried, secret, in_context)
        fresh = Redactor()
        for earlier, earlier_in_context, _ in secrets[: n + 1]:
            _teach(fresh, earlier, earlier_in_context)
        assert [carried.mentions_secret(w) for w in words] == [fresh.mentions_secret(w) for w in words]
