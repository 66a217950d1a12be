"""A batch redacted right after another that holds it takes the first one's results (issue 22).

A compaction redacts the summarizer's input, then the transcript of the view that input was cut from. The second
batch used to look every message up in the ledger again (100,000 look-ups at the first compaction of a long
history); it now takes what the first gave, compared by identity, and asks the ledger only for the rest. The
results must be exactly what the ledger (or a redactor with no ledger) gives, and a secret learned in between
makes the kept batch unusable.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.redact._ledger import Ledger
from contextfold.redact._messages import MessageRedactor

NONCE = "k3ptB4tch"  # (unique to this file: no cache of another test answers for it)
TOKEN = "ghp_" + "Zq8Wm2Xr5Tn7Yp1Vb4Hc6Jd9Kf3Lg0Ms2Nt"


def _view() -> list[Message]:
    texts = [f"plain output {NONCE} {i}" for i in range(30)]
    texts[4] = f"export GITHUB_TOKEN={TOKEN}"
    texts[9] = f"later: {TOKEN[4:]} again"
    return [Message("tool" if i % 2 else "user", text, tool_call_id=f"c{i}" if i % 2 else None,
                    meta={"id": f"{NONCE}:{i}"}) for i, text in enumerate(texts)]


def _oracle(view: list[Message], learned: tuple[str, ...] = ()) -> list[Message]:
    oracle = Redactor(callback=lambda text: text)  # (a callback: no ledger, every message redacted whole)
    for secret in learned:
        oracle.learn(secret, "password")
    oracle.learn_from(view)
    return [oracle.redact_message(m) for m in view]


def _asked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of messages each call of ``Ledger.current`` is asked about."""
    asked: list[int] = []
    real = Ledger.current

    def counting(self: Ledger, items: list[Message], generation: int) -> list[Message | None]:
        asked.append(len(items))
        return real(self, items, generation)

    monkeypatch.setattr(Ledger, "current", counting)
    return asked


@pytest.mark.parametrize("part", [slice(1, 25), slice(0, 30), slice(3, 30)])
def test_the_view_after_its_summary_input_asks_the_ledger_only_for_the_rest(
        part: slice, monkeypatch: pytest.MonkeyPatch) -> None:
    view = _view()
    r = Redactor()
    r.learn_from(view)
    asked = _asked(monkeypatch)
    summarized = r.redact_messages(view[part])
    transcript = r.redact_messages(view)
    # (the summary's input takes what the catch-up kept; the view asks only for the rest; none asked about none)
    assert asked == [n for n in (len(view) - len(view[part]),) if n]
    expected = _oracle(view)
    assert transcript == expected and summarized == expected[part]
    assert all(a is b for a, b in zip(transcript[part], summarized, strict=True))
    assert TOKEN[4:] not in transcript[9].text


def test_a_batch_of_scattered_messages_is_found_too(monkeypatch: pytest.MonkeyPatch) -> None:
    view = _view()
    r = Redactor()
    r.learn_from(view)
    asked = _asked(monkeypatch)
    r.redact_messages(view[::3])
    assert r.redact_messages(view) == _oracle(view)
    assert asked == [20]  # (the first batch from the catch-up's, found by identity)


def test_a_secret_learned_in_between_is_redacted_in_the_second_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    view = _view()
    r = Redactor()
    r.learn_from(view)
    first = r.redact_messages(view[1:20])
    secret = f"plain output {NONCE} 7"
    r.learn(secret, "password")
    asked = _asked(monkeypatch)
    second = r.redact_messages(view)
    assert asked == [len(view)]  # (the kept batch holds at an older generation: not used)
    assert second == _oracle(view, (secret,))
    assert secret not in second[7].text and secret in first[6].text


def test_the_kept_batch_serves_the_next_call_only_and_is_not_the_list_handed_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    view = _view()
    r = Redactor()
    r.learn_from(view)
    handed = r.redact_messages(view)
    handed[2] = Message.user(f"changed by the caller {NONCE}")
    asked = _asked(monkeypatch)
    assert r.redact_messages(view) == _oracle(view)
    assert asked == []  # (the batch kept by the call before)
    other = Message.user(f"another batch {NONCE}")
    assert r.redact_messages([other]) == [other]
    assert r.redact_messages(view) == _oracle(view)
    assert asked == [1, len(view)]  # (the kept batch is now the other one's)


def test_a_batch_kept_in_another_order_is_found_by_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    view = _view()
    r = Redactor()
    r.learn_from(view)
    asked = _asked(monkeypatch)
    r.redact_messages(view[::-1])  # (not runs of the view: found message by message)
    equal_copy = Message(view[3].role, view[3].content, tool_call_id=view[3].tool_call_id, meta=dict(view[3].meta))
    second = r.redact_messages([*view, equal_copy])
    assert second == [*_oracle(view), _oracle(view)[3]]
    assert second[-1] is equal_copy  # (an equal message is not the kept one: looked up as itself)
    assert asked == [1]  # (the reversed view from the catch-up's batch, found by identity; then the new one)


def test_entries_made_before_a_secret_was_learned_are_renewed_by_one_search(monkeypatch: pytest.MonkeyPatch) -> None:
    # The messages add() redacted are recorded at that generation; the compaction's catch-up learns more, and the
    # summary's input then re-checked each of them on its own (~3,000 for 100,000 recorded messages).
    view = _view()
    r = Redactor()
    r.learn_from(view)
    r.redact_messages(view)
    secret = f"plain output {NONCE} 7"
    r.learn(secret, "password")
    recalled: list[str] = []
    real = MessageRedactor._recall

    def noted(self: MessageRedactor, m: Message, *args: Any) -> Message | None:
        recalled.append(str(m.meta["id"]))
        return real(self, m, *args)

    monkeypatch.setattr(MessageRedactor, "_recall", noted)
    got = r.redact_messages(view)
    assert got == _oracle(view, (secret,))
    assert secret not in got[7].text
    assert recalled[:1] == [f"{NONCE}:7"] and set(recalled) == {f"{NONCE}:7"}  # (the one that mentions it)
    assert r.redact_messages(view) == got  # (renewed at this generation: found as they are)
