"""Short strings cleared in bulk are not scanned one by one, and redact as a scan would (issue 22).

A batch's suspect messages are redacted one by one, each with its own id, meta values and arguments; an event may
list every id a compaction removed. ``Redactor.clearing`` runs one prefilter pass over such strings first; inside
it ``redact_text`` returns a cleared string without scanning it. Counted here by the scans made, and checked
against a redactor that scans every string, also across a secret learned after the strings were cleared.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.redact import _redactor as redactor_module
from contextfold.redact._scanner import Scanner

_NONCE = "q7v3clearing"
_GITHUB = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def _scanned(redactor: Redactor, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts ``redactor`` scans from now on (each scan the cache does not answer)."""
    seen: list[str] = []
    original = Scanner.scan

    def counting(self: Scanner, text: str) -> tuple[object, ...]:
        seen.append(text)
        return original(self, text)

    monkeypatch.setattr(Scanner, "scan", counting)
    return seen


def _suspects(n: int, nonce: str) -> list[Message]:
    # Each content holds a trigger ("password") the gate cannot clear (a parameter's type, which only the scan turns
    # down), so the prefilter keeps the message: it is redacted alone.
    # (Each test its own nonce: the scan cache is shared by redactors with the same patterns.)
    return [Message("tool", f"{nonce} run {i}: def login(password: str)", tool_call_id=f"c{i}",
                    meta={"id": f"{nonce}:{i}", "label": f"{nonce} step {i}"}) for i in range(n)]


def test_the_ids_and_meta_of_a_batchs_suspects_are_not_scanned_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()
    batch = _suspects(40, f"{_NONCE}a")
    scanned = _scanned(redactor, monkeypatch)
    assert redactor.redact_messages(batch) == batch
    short = {str(v) for m in batch for v in m.meta.values()}
    assert not short.intersection(scanned)
    assert {m.content for m in batch} <= set(scanned)  # (the texts holding the trigger are scanned)


def test_learning_a_batch_does_not_scan_its_suspects_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()
    batch = _suspects(40, f"{_NONCE}b")
    scanned = _scanned(redactor, monkeypatch)
    redactor.learn_from(batch)
    assert not {m.meta["id"] for m in batch}.intersection(scanned)


def test_a_long_list_of_ids_is_cleared_in_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()
    ids = [f"{_NONCE}c:{i}" for i in range(500)] + [f"token {_GITHUB}"]
    scanned = _scanned(redactor, monkeypatch)
    out = redactor.redact_obj({"ids": tuple(ids)})["ids"]
    assert out[:-1] == tuple(ids[:-1])
    assert _GITHUB not in out[-1]
    assert scanned == [f"token {_GITHUB}"]


def test_a_string_cleared_before_a_secret_was_learned_is_redacted_after() -> None:
    redactor = Redactor()
    value = f"{_NONCE}dhunter2xyz"
    text = f"run-{value}-7"
    with redactor.clearing([text, f"{_NONCE}d:other"]):
        assert redactor.redact_text(text) == text
        redactor.redact_text(f"password={value}")  # learns the value, named a password in context
        assert value not in redactor.redact_text(text)
    assert value not in redactor.redact_text(text)


def test_a_message_that_redacts_to_itself_is_not_rebuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()
    built: list[Message] = []
    original = redactor_module.replace

    def counting(obj: Message, **changes: object) -> Message:
        built.append(obj)
        return original(obj, **changes)

    monkeypatch.setattr(redactor_module, "replace", counting)
    clean = Message("assistant", f"{_NONCE}e the password prompt was skipped",
                    (ToolCall("c1", "bash", '{"cmd": "ls password_docs"}'),), meta={"id": f"{_NONCE}e:1"})
    assert redactor.redact_message(clean) is clean
    assert built == []
    secret = dataclasses.replace(clean, tool_calls=(ToolCall("c2", "bash", f'{{"cmd": "echo {_GITHUB}"}}'),))
    redacted = redactor.redact_message(secret)
    assert _GITHUB not in redacted.tool_calls[0].arguments
    assert redacted.content == clean.content and redacted.meta == clean.meta


_short = st.sampled_from([f"{_NONCE}:1", "password", "ſecret", "hunter2xyz", f"key {_GITHUB}", "sk_test_abc",
                          "plain words", "AKIAIOSFODNN7EXAMPLE", "12,000 files"]) | st.text(max_size=24)


@settings(max_examples=30, deadline=None)
@given(st.lists(_short, min_size=64, max_size=72), st.lists(_short, max_size=3))
def test_a_list_cleared_in_bulk_redacts_as_each_string_scanned(strings: list[str], learned: list[str]) -> None:
    bulk, one = Redactor(), Redactor()
    for redactor in (bulk, one):
        for value in learned:
            redactor.redact_text(f"password={value}")
    assert bulk.redact_obj(strings) == [one.redact_text(s) for s in strings]
    assert bulk._learned == one._learned
