"""A secret learned (on another thread) while a clean set is computed must not pass as cleared.

Fifteenth session, issue 22 (review of 4f63577: the telemetry thread clears a run of events in one
``Redactor.clearing()``). A result the redactor labels with the secrets' generation ("clean at generation g") is only
true when g is read BEFORE the work: read after, a ``learn()`` landing in between makes a set computed without the new
secret look current, and a string holding it is never scanned again. Each test forces that interleaving without
threads or sleeps: a hook learns the secret right after the clean set is computed, where another thread's
``learn()`` may land.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.redact._messages import MessageRedactor

# No trigger and no pattern finds it: only the memory knows it, once learned. A nonce: no cache can hold it before.
SECRET = "zq9Rk2vLm7Xp4Tn8Wc3Y-f1s17"


class _LearnsAfterClean(MessageRedactor):
    """A message redactor that learns ``SECRET`` right after clearing strings holding it (as another thread may)."""

    __slots__ = ("learned",)

    def __init__(self, redactor: Redactor) -> None:
        super().__init__(redactor)
        self.learned = False

    def clean_strings(self, values: Iterable[Any]) -> frozenset[str]:
        values = list(values)
        clean = super().clean_strings(values)
        if not self.learned and any(SECRET in v for v in values if isinstance(v, str)):
            self.learned = True
            self.redactor.learn(SECRET, "api_key")  # (lands between the clean set and the label it is given)
        return clean


def _racing_redactor() -> Redactor:
    redactor = Redactor()
    redactor._message_redactor = _LearnsAfterClean(redactor)
    return redactor


def test_clearing_does_not_clear_a_string_holding_a_secret_learned_while_it_cleared() -> None:
    redactor = _racing_redactor()
    bare = f"note {SECRET}"
    with redactor.clearing([*(f"evt-{i}-f1s17" for i in range(20)), bare]):
        assert redactor._message_redactor.learned  # type: ignore[attr-defined]
        got = redactor.redact_text(bare)
        assert redactor.redact_text("evt-3-f1s17") == "evt-3-f1s17"
    assert SECRET not in got
    assert got == redactor.redact_text(bare)  # (the same as outside any clearing)


def test_learn_from_does_not_keep_a_copy_whose_id_holds_a_secret_learned_while_ids_were_cleared() -> None:
    redactor = _racing_redactor()
    origin = Message("tool", "line of output f1s17\n" * 4, tool_call_id="c1", name="read")
    copies = [origin.with_meta(id="m0-f1s17"), origin.with_meta(id="m1-f1s17"),
              origin.with_meta(id=f"{SECRET}-m2")]
    redactor.learn_from([origin, *copies])
    assert redactor._message_redactor.learned  # type: ignore[attr-defined]
    for m in copies:
        out = redactor.redact_message(m)
        assert SECRET not in str(dict(out.meta)), out.meta
    assert redactor.redact_message(copies[0]) is copies[0]  # (a clean copy still comes back as itself)
