"""What a catch-up learned from is kept for the summarizer's request that follows it (issue 22).

A compaction first learns the secrets of every message noted since the last one (``Redactor.learn_from``, the
session's catch-up), then redacts the summarizer's input, a run of those messages. That input used to be looked up
in the ledger message by message (99,992 look-ups at the first compaction of 100,000 recorded messages); the
catch-up now keeps what each message it learned from redacts to, and the summarizer's request takes it from there.
The results must be what a redactor with no ledger gives, messages redacted before a secret was learned included.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.redact._ledger import Ledger

NONCE = "l3arnK3pt"  # (unique to this file: no cache of another test answers for it)
TOKEN = "ghp_" + "Vq7Wm2Xr5Tn8Yp1Vb4Hc6Jd9Kf3Lg0Ms2Qz"


def _origins() -> list[Message]:
    texts = [f"plain output {NONCE} {i}" for i in range(8)]
    texts[3] = f"export GITHUB_TOKEN={TOKEN}"
    texts[6] = f"later: {TOKEN[4:]} again"
    return [Message("tool" if i % 2 else "user", text, tool_call_id=f"c{i}" if i % 2 else None)
            for i, text in enumerate(texts)]


def _copies(order: list[int], origins: list[Message]) -> list[Message]:
    """A manager's view of a repeated history: each message a copy of an origin, given its own id."""
    return [origins[k].with_id(f"{NONCE}:{i}") for i, k in enumerate(order)]


def _oracle(view: list[Message]) -> list[Message]:
    oracle = Redactor(callback=lambda text: text)  # (a callback: no ledger, every message redacted whole)
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


def test_the_summary_input_after_a_catch_up_asks_the_ledger_for_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    view = _copies([k % 8 for k in range(40)], _origins())
    r = Redactor()
    r.redact_messages(view[-6:])  # (what add() redacts of a bulk: its end, before the token earlier is learned)
    r.learn_from(view)
    asked = _asked(monkeypatch)
    summarized = r.redact_messages(view[1:-4])
    assert asked == []
    expected = _oracle(view)
    assert summarized == expected[1:-4]
    assert TOKEN[4:] not in summarized[5].text and TOKEN not in summarized[2].text
    assert r.redact_messages(view) == expected  # (the transcript after it, as before)


def test_a_secret_learned_after_the_batch_is_kept_makes_it_unused(monkeypatch: pytest.MonkeyPatch) -> None:
    view = _copies([k % 8 for k in range(24)], _origins())
    r = Redactor()
    r.learn_from(view)
    r.learn(f"{NONCE}:5", "password")  # (an id, learned after the catch-up: every copy must be looked at again)
    summarized = r.redact_messages(view[2:])
    assert f"{NONCE}:5" not in summarized[3].meta["id"]
    assert summarized[4] == view[6] or TOKEN[4:] not in summarized[4].text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order=st.lists(st.integers(0, 7), min_size=1, max_size=30),
       ahead=st.integers(0, 30), start=st.integers(0, 30), stop=st.integers(0, 30))
def test_the_kept_batch_gives_what_a_redactor_without_a_ledger_gives(order: list[int], ahead: int, start: int,
                                                                      stop: int) -> None:
    view = _copies(order, _origins())
    r = Redactor()
    if ahead:
        r.redact_messages(view[-ahead:])  # (some redacted before the catch-up, maybe before a secret was learned)
    r.learn_from(view)
    part = slice(min(start, len(view)), max(min(start, len(view)), len(view) - stop))
    assert r.redact_messages(view[part]) == _oracle(view)[part]
