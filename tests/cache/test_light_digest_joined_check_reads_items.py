"""The light digest's joined check reads the candidates themselves, not only what the output's own scan found.

A value a rule turns down in the output's context (a lower-case word followed by ``)``: ``password=pw)`` reads as
code) is a secret once its item stands alone (the URL ends at the value). The output's scan finds nothing there, so
nothing is blanked; the check of the walked candidates is what keeps the value out of the digest. Issue 22 asked
whether that check could be derived from the output's own scan instead of scanning its candidates (twentieth
session, lane s20a): it cannot, as this shows; ``bench/bench_read_ahead_secrets.py`` measures what it costs.
"""

from __future__ import annotations

from collections.abc import Callable

from contextfold.cache._light_digest import light_digest
from contextfold.redact import Redactor, SecretMemory
from contextfold.tokens.counting import EstimatingCounter

COUNTER = EstimatingCounter()
CONFIGURED = Redactor()  # (its patterns compiled once; each digest below is a session of its own)
URL = "https://api.example.com/v1?password=lowercasepw"
TEXT = f"GET {URL}) 200\nValueError at /srv/app/views.py\n"


def _digest(mentions_secret: Callable[[str], bool] | None) -> list[str]:
    redactor = CONFIGURED.for_session(SecretMemory())
    check = redactor.mentions_secret if mentions_secret is None else mentions_secret
    digest = light_digest(TEXT, budget_tokens=60, counter=COUNTER, mentions_secret=check,
                          blank=redactor.blank, learn=redactor.learn_text)
    return digest.text.split(", ") if digest.text else []


def test_the_output_scan_finds_nothing_where_the_item_alone_holds_a_password() -> None:
    session = CONFIGURED.for_session(SecretMemory())
    assert session.spans(TEXT) == []  # (in context: code, turned down)
    assert [f.name for f in session.scan(URL)] == ["password"]  # (alone: a password)


def test_the_joined_check_keeps_the_item_out_of_the_digest() -> None:
    listed = _digest(None)
    assert URL not in listed
    assert "GET" in listed
    # (Answered without reading the candidates, as a check derived from the output's scan would, it is listed.)
    assert URL in _digest(lambda text: False)
