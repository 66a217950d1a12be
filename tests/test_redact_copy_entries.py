"""The copies of one message given only an id are recorded once for them all, by their origin (issue 22).

``Redactor.learn_from`` of a repeated history (100,000 recorded messages: each loaded message added ~30 times, each
copy with its own id) kept an entry per copy, a second of the first ``prepare()``. Now the copies whose content and id
redact to themselves share one entry (``Ledger.put_copies``): the origin, a generation and the ids clean then. What
must hold: each copy still redacts exactly as a redactor reading it alone would, a secret learned after the entry is
looked for in every copy (its text and its id), and copies an entry does not vouch for are read on their own.
"""

from __future__ import annotations

import uuid

import pytest

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor

TOKEN = "ghp_" + "Zq8Lm3Np7Rt2Vx6Bc9Df4Gh1Jk5"


def _origins(nonce: str) -> list[Message]:
    return [
        Message("user", f"fix the failing test {nonce}"),
        Message("assistant", "", tool_calls=(ToolCall(f"c-{nonce}", "bash", '{"cmd": "pytest -x"}'),)),
        Message.tool(f"c-{nonce}", f"collected 12 items {nonce}\n" + "test_ok PASSED\n" * 20, name="bash"),
    ]


def _history(origins: list[Message], passes: int, tag: str) -> list[Message]:
    return [m.with_meta(id=f"{tag}:{p}:{i}") for p in range(passes) for i, m in enumerate(origins)]


def _oracle(history: list[Message]) -> list[Message]:
    """What a redactor without any ledger makes of each message (a callback turns the ledger off)."""
    oracle = Redactor(callback=lambda text: text)
    oracle.learn_from(history)
    return [oracle.redact_message(m) for m in history]


def test_clean_copies_share_one_entry_and_each_redacts_to_itself() -> None:
    nonce = uuid.uuid4().hex
    history = _history(_origins(nonce), 6, "a")
    r = Redactor()
    r.learn_from(history)
    # (the first of each content only; its copies are found by their origin)
    assert len(r._message_redactor.ledger) == 3
    assert all(r._message_redactor.ledger.recorded(m) for m in history)
    assert r.redact_messages(history) == history
    assert all(r.redact_message(m) is m for m in history)
    assert r.redact_messages(history) == _oracle(history)


def test_a_secret_learned_after_the_entry_is_redacted_in_every_copy_and_its_id() -> None:
    nonce = uuid.uuid4().hex
    value = TOKEN.removeprefix("ghp_")
    origins = [Message("user", f"keep {value} around {nonce}"), *_origins(nonce)]
    history = _history(origins, 4, "b")
    history.append(origins[1].with_meta(id=f"b:{value}"))  # (a copy whose id holds the value, clean until it is known)
    r = Redactor()
    r.learn_from(history)
    assert r.redact_message(history[-1]) is history[-1]
    r.redact_text(f"export GH_TOKEN={TOKEN}")  # learned: its long runs are remembered from now on
    got = r.redact_messages(history)
    assert got == _oracle([*history, Message("user", f"GH_TOKEN={TOKEN}")])[:-1]
    assert not [m for m in got if value in m.text or value in str(m.meta.get("id"))]
    assert got[-1].meta["id"].startswith("b:[REDACTED:")


def test_a_copy_whose_id_holds_a_secret_is_redacted_and_does_not_clear_the_others() -> None:
    nonce = uuid.uuid4().hex
    origins = _origins(nonce)
    history = _history(origins, 3, "c")
    history.insert(4, origins[2].with_meta(id=f"password={TOKEN}"))
    r = Redactor()
    r.learn_from(history)
    got = [r.redact_message(m) for m in history]
    assert got == _oracle(history)
    assert TOKEN not in got[4].meta["id"]
    assert all(g is m for g, m in zip(got, history, strict=True) if m is not history[4])


def test_copies_recorded_by_an_earlier_batch_stay_recorded_after_a_later_one() -> None:
    nonce = uuid.uuid4().hex
    origins = _origins(nonce)
    first, second = _history(origins, 3, "d1"), _history(origins, 3, "d2")
    r = Redactor()
    r.learn_from(first)
    r.learn_from(second)  # (another entry for the same origins, with other ids)
    assert all(r._message_redactor.ledger.recorded(m) for m in [*first, *second])
    both = [*first, *second]
    assert r.redact_messages(both) == both == _oracle(both)


def test_a_copy_of_an_origin_whose_content_holds_a_secret_is_redacted_copy_by_copy() -> None:
    nonce = uuid.uuid4().hex
    origin = Message.tool(f"c-{nonce}", f"export API_TOKEN={TOKEN}\n{nonce}", name="bash")
    history = [origin.with_meta(id=f"e:{i}") for i in range(5)]
    r = Redactor()
    r.learn_from(history)
    got = r.redact_messages(history)
    assert got == _oracle(history)
    assert [m.meta["id"] for m in got] == [f"e:{i}" for i in range(5)]
    assert all(TOKEN not in m.text for m in got)


def test_a_short_string_found_clean_is_redacted_once_a_secret_in_it_is_learned() -> None:
    # redact_text remembers the short strings it found clean, for one generation of the memory (issue 22).
    nonce = uuid.uuid4().hex[:8]
    value = f"Kv7{nonce}Qz9"
    r = Redactor()
    meta = {"note": f"use {value} here", "agent": "main"}
    first = r.redact_message(Message("user", "hi", meta={**meta, "id": "f:1"}))
    assert first.meta["note"] == f"use {value} here"
    r.redact_text(f"password={value}")  # learned: the same short string is no longer clean
    again = r.redact_message(Message("user", "hi", meta={**meta, "id": "f:2"}))
    assert again.meta["note"] == "use [REDACTED:password] here"
    assert r.redact_text(f"use {value} here") == "use [REDACTED:password] here"


def test_a_copy_with_other_patterns_does_not_take_the_strings_its_original_found_clean() -> None:
    address = f"ops-{uuid.uuid4().hex[:8]}@example.com"
    r = Redactor()  # (personal data is redacted for telemetry only)
    assert r.redact_text(address) == address
    assert r.for_telemetry().redact_text(address) == "[REDACTED:email]"
    assert r.redact_text(address) == address


def test_the_clean_short_strings_kept_are_bounded_in_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextfold.redact import _redactor

    monkeypatch.setattr(_redactor, "_PLAIN_BUDGET_CHARS", 1_000)
    r = Redactor()
    words = [f"word {i} {uuid.uuid4().hex}" for i in range(200)]
    assert [r.redact_text(w) for w in words] == words
    assert r._plain is not None and sum(map(len, r._plain[3])) <= 1_000
    assert [r.redact_text(w) for w in words] == words
