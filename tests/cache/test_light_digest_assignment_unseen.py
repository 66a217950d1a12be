"""The light digest never lists a value bare when a candidate assigns it to a secret-named key (``password=X``, a
URL's ``?api_key=X``, ``user:X@``), whether or not that item fits the budget: the check of the assignment is what
teaches the session ``X`` (review of the seventeenth session: the joined check asked only the items chosen, and a
URL too long for the budget was never asked)."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from contextfold.cache._light_digest import light_digest
from contextfold.redact import Redactor, SecretMemory
from contextfold.redact._gate import KEY_NAME_WORDS
from contextfold.tokens.counting import EstimatingCounter

NONCE = "lgasg7w"
COUNTER = EstimatingCounter()
CONFIGURED = Redactor()  # (its patterns compiled once; each digest below is a session of its own)


def _listed(text: str, budget: int) -> list[str]:
    redactor = CONFIGURED.for_session(SecretMemory())  # (a fresh session: nothing learned before this output)
    digest = light_digest(text, budget_tokens=budget, counter=COUNTER, mentions_secret=redactor.mentions_secret)
    return digest.text.split(", ") if digest.text else []


def test_a_url_credential_too_long_for_the_budget_still_keeps_its_value_out() -> None:
    value = f"Kk9{NONCE}Lm00Pq11"
    text = f"GET https://api.example.com/v1/items?api_key={value}\n{value} {value} {value}\n"
    for budget in (8, 12):  # (the URL does not fit; on 2585073 the value was listed beside GET)
        listed = _listed(text, budget)
        assert value not in listed, (budget, listed)
        assert "GET" in listed


def test_an_assignment_after_its_bare_value_is_asked_first() -> None:
    value = f"Zq8{NONCE}Rt5Yu7"
    text = f"connecting with {value}\nretry {value} then {value}\nsee `DB_PASSWORD={value}` in the env\n"
    for budget in range(1, 30):
        assert value not in _listed(text, budget), budget


_KEYS = st.tuples(st.sampled_from(["", "DB_", "api_", "AWS_SECRET_", "github_", "x-"]),
                  st.sampled_from(KEY_NAME_WORDS), st.booleans()).map(
    lambda parts: parts[0] + (parts[1].upper() if parts[2] else parts[1]))
_VALUES = st.tuples(st.text("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz", min_size=3, max_size=6),
                    st.integers(100, 99_999)).map(lambda parts: f"{parts[0]}{parts[1]}{NONCE}x9")
# (the forms whose assignment is a candidate: the entities list ``passwd=X`` alone on a line as ``X`` only, and the
# whole-text scan that redacts it there is not the digest's)
_FORMS = st.sampled_from(["`{key}={value}`", "see `{key}={value}` in the env",
                          "GET https://api.example.com/v1/items?{key}={value}&page=2",
                          "curl https://h.example.com/x?a=1&{key}={value}", "postgres://admin:{value}@db.example.com/app"])


@settings(max_examples=20, deadline=None)
@given(_KEYS, _VALUES, _FORMS, st.integers(1, 4), st.booleans(), st.sampled_from(["", "ValueError at /srv/app/x.py\n"]))
def test_no_budget_lists_an_assigned_value(key: str, value: str, form: str, repeats: int, value_first: bool,
                                           filler: str) -> None:
    assignment = form.format(key=key, value=value)
    assume(CONFIGURED.for_session(SecretMemory()).mentions_secret(assignment))  # (a key the key rule redacts under)
    bare = " ".join([f"retry {value}"] * repeats)
    text = f"{filler}{bare}\n{assignment}\n" if value_first else f"{filler}{assignment}\n{bare}\n"
    for budget in range(1, 33):  # (the URL forms are 20-odd tokens: past them everything fits)
        assert value not in _listed(text, budget), (budget, text)
