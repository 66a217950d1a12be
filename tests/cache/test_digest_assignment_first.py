"""A digest never lists a value bare above the ``key=value`` item whose secret check teaches it (sixteenth stop's
"left out"): items are checked in their ranked order, and a bare value mentioned more often ranked above its
assignment, so it was listed before the assignment's check learned it (only where the whole-text scan missed the
secret; here the material is read unblanked to stand for that)."""

from __future__ import annotations

from contextfold.cache._digest import _rank, output_digest
from contextfold.redact import Redactor
from contextfold.tokens.counting import EstimatingCounter

NONCE = "dgasg4q"


def _digest(text: str) -> str:
    redactor = Redactor()
    return output_digest(text, budget_tokens=200, counter=EstimatingCounter(),
                         allow=lambda item: not redactor.mentions_secret(item))


def test_a_backtick_assignment_is_checked_before_its_bare_value() -> None:
    value = f"Zq8{NONCE}Lm2Pw9k3"
    text = f"see `DB_PASSWORD={value}` in the env\nconnecting with {value}\nretry {value} then {value}\n"
    assert value not in _digest(text)


def test_a_url_credential_is_checked_before_its_bare_value() -> None:
    value = f"Kk9{NONCE}Lm00Pq11"
    text = f"GET https://api.example.com/v1/items?api_key={value}\n{value} {value} {value}\n"
    assert value not in _digest(text)


def test_only_the_assignment_moves_just_ahead_of_its_value() -> None:
    text = (f"`mode={NONCE}Ab12Cd34` ValueError ValueError ValueError\n{NONCE}Ab12Cd34 {NONCE}Ab12Cd34\n"
            "/srv/app/x.py /srv/app/x.py\n")
    items = _rank(text).items
    assert items.index(f"mode={NONCE}Ab12Cd34") == items.index(f"{NONCE}Ab12Cd34") - 1
    assert items.index("ValueError") < items.index(f"mode={NONCE}Ab12Cd34")
