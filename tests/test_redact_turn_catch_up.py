"""A masking's catch-up keeps nothing for a bulk redaction (issue 22).

A masking turn learns from the messages added since the last catch-up (``Redactor.learn_from``, ~15 in the lm32b loop,
all redacted already by add() or the read-ahead). What a catch-up learned from is kept for the summarizer's request
that follows it (``test_redact_learned_batch``), which meant looking each message up in the ledger first; no summary
follows a masking's catch-up, so ``learn_from(keep=False)`` keeps nothing and asks the ledger nothing. What is
redacted afterwards is unchanged.
"""

from __future__ import annotations

import pytest

from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.redact._ledger import Ledger

NONCE = "tUrnCaUgHt"  # (unique to this file: no cache of another test answers for it)
TOKEN = "ghp_" + "Rk4Tq8Wn2Zp6Xm0Vc3Hb7Jd1Lf5Gs9Ny2Qa"


def _turn() -> list[Message]:
    return [Message("assistant", f"running the tests {NONCE}"),
            Message("tool", f"export GITHUB_TOKEN={TOKEN}\nok {NONCE}", tool_call_id="c1"),
            Message("user", f"and now {TOKEN[4:]} {NONCE}")]


def test_a_catch_up_that_keeps_nothing_asks_the_ledger_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()
    turn = _turn()
    redactor.redact_messages(turn[:1])  # (add() redacted the first before the catch-up)
    asked: list[int] = []
    real = Ledger.current

    def counting(self: Ledger, items: list[Message], generation: int) -> list[Message | None]:
        asked.append(len(items))
        return real(self, items, generation)

    monkeypatch.setattr(Ledger, "current", counting)
    redactor.learn_from(turn, keep=False)
    assert asked == []
    oracle = Redactor(callback=lambda text: text)  # (no ledger: every message redacted whole)
    oracle.learn_from(turn)
    assert redactor.redact_messages(turn) == [oracle.redact_message(m) for m in turn]
    assert TOKEN[4:] not in redactor.redact_messages(turn)[2].text


def test_a_masking_turns_catch_up_keeps_nothing_for_a_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextfold.manager._secrets import SessionSecrets

    redactor = Redactor()
    secrets = SessionSecrets(redactor, None)
    turn = _turn()
    redactor.redact_messages(turn)  # (add() redacted them)
    secrets.added(turn)
    kept: list[int] = []
    real = Ledger.keep_batch

    def keeping(self: Ledger, items: list[Message], redacted: tuple[Message, ...], generation: int) -> None:
        kept.append(len(items))
        real(self, items, redacted, generation)

    monkeypatch.setattr(Ledger, "keep_batch", keeping)
    secrets.catch_up(for_summary=False)
    assert kept == []
    secrets.added(turn)
    secrets.catch_up()  # (a compaction's: kept for its summarizer's request, as before)
    assert kept == [3]
