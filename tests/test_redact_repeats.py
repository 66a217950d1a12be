"""A message equal to one redacted before but for its ``meta["id"]`` reuses that redaction (issue 22).

The manager numbers every message it is given, so a history that repeats a tool output holds distinct objects
with distinct ids. Their redaction is reused only for identical content: the result must be exactly what a
redactor that never saw the first copy makes (with the same secrets remembered), the copy's own id redacted on its
own, and any other difference (a meta value, a secret learned since) means a redaction of its own.
"""

from __future__ import annotations

import json

import pytest
from redact_corpus import CODE, SECRETS

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.redact._ledger import Ledger
from contextfold.redact._messages import MessageRedactor

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _messages(copy: int) -> list[Message]:
    out: list[Message] = []
    for i, item in enumerate([*CODE[::4], *SECRETS[::2]]):  # (a sample: each case under a second)
        args = json.dumps({"cmd": f"cat file_{i}", "note": item.text[:80]})
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", args),), meta={"id": f"s:{copy}:{2 * i}"}))
        out.append(Message("tool", item.text, tool_call_id=f"c{i}", name="bash",
                           meta={"id": f"s:{copy}:{2 * i + 1}", "label": item.label}))
    return out


def _fresh_ledger(r: Redactor) -> Redactor:
    r._message_redactor.ledger = Ledger()
    return r


@pytest.mark.parametrize("bulk", [False, True])
def test_copies_redact_exactly_as_without_the_ledger_and_are_not_scanned_again(
        bulk: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    first, copies = _messages(0), _messages(1)
    reused, oracle = Redactor(), Redactor()
    for r in (reused, oracle):
        r.redact_messages(first)
    _fresh_ledger(oracle)
    walked = 0
    real = Redactor._redact_fields

    def counting(self: Redactor, m: Message) -> Message:
        nonlocal walked
        walked += self is reused
        return real(self, m)

    monkeypatch.setattr(Redactor, "_redact_fields", counting)
    got = reused.redact_messages(copies) if bulk else [reused.redact_message(m) for m in copies]
    expected = oracle.redact_messages(copies) if bulk else [oracle.redact_message(m) for m in copies]
    assert got == expected
    assert [m.meta["id"] for m in got] == [m.meta["id"] for m in copies]  # each copy keeps its own id
    assert reused._learned == oracle._learned
    assert walked == 0  # (the oracle, with no ledger, walks the copies it cannot clear)


def test_a_copy_whose_id_holds_a_secret_has_it_redacted_and_learned() -> None:
    r = Redactor()
    original = Message.tool("c1", "nothing to see", meta={"id": "plain"})
    copy = Message.tool("c1", "nothing to see", meta={"id": f"token {TOKEN}"})
    assert r.redact_message(original) is original
    redacted = r.redact_message(copy)
    assert TOKEN not in redacted.meta["id"] and "[REDACTED:" in redacted.meta["id"]
    assert redacted.content == "nothing to see"
    assert TOKEN in r.memory.values()
    assert r.redact_message(original) is original  # (the first one is still itself)


def test_a_copy_with_another_meta_value_is_redacted_on_its_own() -> None:
    r = Redactor()
    original = Message.tool("c1", "output", meta={"id": "a", "note": "fine"})
    other = Message.tool("c1", "output", meta={"id": "b", "note": f"password={TOKEN}"})
    assert r.redact_message(original) is original
    note = r.redact_message(other).meta["note"]
    assert TOKEN not in note and note.startswith("password=[REDACTED:")


def test_a_copy_mentioning_a_secret_learned_since_is_redacted() -> None:
    r = Redactor()
    original = Message.tool("c1", f"echo {TOKEN[4:]}", meta={"id": "a"})
    copy = Message.tool("c1", f"echo {TOKEN[4:]}", meta={"id": "b"})
    assert r.redact_message(original) is original  # (the bare run is not recognised by any pattern)
    r.redact_text(f"export GITHUB_TOKEN={TOKEN}")  # learned: its long runs are now remembered
    assert TOKEN[4:] not in r.redact_message(copy).text
    assert TOKEN[4:] not in r.redact_message(original).text


def test_learning_from_copies_clears_their_ids_in_bulk_and_still_finds_a_secret_in_one() -> None:
    r, oracle = Redactor(), Redactor()
    originals = [Message.tool(f"c{i}", f"output {i}", meta={"id": f"s:0:{i}"}) for i in range(20)]
    copies = [Message.tool(f"c{i}", f"output {i}", meta={"id": f"s:1:{i}"}) for i in range(20)]
    copies[7] = Message.tool("c7", "output 7", meta={"id": f"password={TOKEN}"})
    for each in (r, oracle):
        each.learn_from(originals)
    r.learn_from(copies)  # (the copies are found by content: only their ids are read)
    _fresh_ledger(oracle).learn_from(copies)
    assert r._learned == oracle._learned and TOKEN in r.memory.values()
    assert [r.redact_message(m) for m in copies] == [oracle.redact_message(m) for m in copies]
    assert r.redact_message(copies[3]) is copies[3]
    assert TOKEN not in r.redact_message(copies[7]).meta["id"]


def test_a_learned_history_is_redacted_from_the_ledger_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 22: learn_from recorded only the messages that held a trigger, and recalled copies before the batch's
    # secrets were learned; the summarizer's request then scanned the rest again (~26% of the first prepare() of
    # 100,000 recorded messages). The bare value is mentioned before the message that teaches it, in every copy.
    value = TOKEN.removeprefix("ghp_")
    history = [
        Message(role, text, meta={"id": f"s:{copy}:{i}"})
        for copy in range(3)
        for i, (role, text) in enumerate([("user", f"keep {value} for later"), ("tool", f"export GH_TOKEN={TOKEN}"),
                                          *(("tool", item.text) for item in [*CODE[::6], *SECRETS[::4]])])
    ]
    learned = Redactor()
    learned.learn_from(history)
    oracle = Redactor(callback=lambda text: text)  # (a callback: no ledger, every message redacted whole)
    oracle.learn_from(history)
    expected = [oracle.redact_message(m) for m in history]
    monkeypatch.setattr(Redactor, "_redact_fields", lambda self, m: pytest.fail(f"{m.meta['id']} scanned again"))
    monkeypatch.setattr(MessageRedactor, "_suspects", lambda self, items: pytest.fail("a batch scanned again"))
    got = learned.redact_messages(history)
    assert got == expected
    assert all(value not in m.text for m in got) and got[0].text.startswith("keep [REDACTED:")
    assert learned._learned == oracle._learned
