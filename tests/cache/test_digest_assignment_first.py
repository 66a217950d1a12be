"""A digest never lists a value bare above the ``key=value`` item whose secret check teaches it (sixteenth stop's
"left out"): items are checked in their ranked order, and a bare value mentioned more often ranked above its
assignment, so it was listed before the assignment's check learned it (only where the whole-text scan missed the
secret; here the material is read unblanked to stand for that)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache._digest import _assignments_first, _rank, output_digest
from contextfold.redact import Redactor
from contextfold.redact._key_words import KEY_NAME_WORDS
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
    text = (f"`db_token={NONCE}Ab12Cd34` ValueError ValueError ValueError\n{NONCE}Ab12Cd34 {NONCE}Ab12Cd34\n"
            "/srv/app/x.py /srv/app/x.py\n")
    items = _rank(text).items
    assert items.index(f"db_token={NONCE}Ab12Cd34") == items.index(f"{NONCE}Ab12Cd34") - 1
    assert items.index("ValueError") < items.index(f"db_token={NONCE}Ab12Cd34")


def test_an_assignment_to_a_key_naming_no_secret_keeps_its_rank() -> None:
    """Review of 674ab2e: any key moved (``mode=X``, a search's ``?q=X``): no secret check learns from it."""
    text = (f"`mode={NONCE}Ef56Gh78` ValueError ValueError ValueError\n{NONCE}Ef56Gh78 {NONCE}Ef56Gh78\n"
            "/srv/app/x.py /srv/app/x.py\n")
    items = _rank(text).items
    assert items.index(f"{NONCE}Ef56Gh78") < items.index(f"mode={NONCE}Ef56Gh78")  # 1c2b5ec: moved ahead


def test_a_search_urls_query_value_does_not_push_the_error_out() -> None:
    text = (f"GET https://example.com/search?q=ValueError&page=2 -> 200 {NONCE}\n"
            "ValueError ValueError ValueError at app.py:3\n")
    digest = output_digest(text, budget_tokens=14, counter=EstimatingCounter())
    assert digest.split(", ")[:2] == ["ValueError", "app.py"], digest  # 1c2b5ec: the URL, then GET


_PIECES = st.sampled_from(["password=", "DB_TOKEN=", "q=", "mode=", "://u:", "@h.io", "Zq8", "Lm2", "-", ".", "/",
                           "&", "?", " ", "`"])
_ITEMS = st.lists(st.lists(_PIECES, min_size=1, max_size=6).map("".join), min_size=1, max_size=12, unique=True)


def _moved_one_item_at_a_time(items: list[str]) -> tuple[str, ...]:
    """What the order must be: each item read alone (the digest's joined scan finds the same assignments)."""
    place = {item: at for at, item in enumerate(items)}
    keys = []
    for at, item in enumerate(items):
        first = at
        for found in re.finditer(r"=([^=&;,@/\s\"'`)\]}]+)", item):
            if item[:found.start()].lower().endswith(KEY_NAME_WORDS):
                first = min(first, place.get(found.group(1), at))
        for value in re.findall(r"://[^/:@\s]*:([^/@\s]+)@", item):
            first = min(first, place.get(value, at))
        keys.append((first, 0 if first < at else 1, at))
    return tuple(items[at] for _, _, at in sorted(keys))


@settings(max_examples=200, deadline=None)
@given(_ITEMS, st.data())
def test_the_order_is_that_of_each_item_read_alone(items: list[str], data: st.DataObject) -> None:
    # (values listed bare too, so that some assignments move)
    values = [v for item in items for v in re.findall(r"[=:]([A-Za-z0-9]+)", item)]
    extra = data.draw(st.lists(st.sampled_from(values), unique=True), label="bare values") if values else []
    listed = list(dict.fromkeys([*extra, *items]))
    assert _assignments_first(listed) == _moved_one_item_at_a_time(listed)
