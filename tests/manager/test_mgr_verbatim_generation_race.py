"""A secret learned on another thread right after the summary request's messages are redacted is not let through.

Sixteenth session (lane S), issue 22: ``SecretSafeSummarizer.summarize`` gives a verbatim text its user message's
redacted content when nothing was learned since the messages were redacted. It read the memory's generation AFTER
``redact_messages``: a secret another thread learned in between (the telemetry thread, the read-ahead) made the
redaction look current, and a verbatim text holding that secret took its message's unredacted content, bare. The
same class of race as ``Redactor.clearing`` (tests/redteam/test_redteam17_clearing_race.py): a label must be the
generation read BEFORE the work it labels. The interleaving is forced: the ledger's keeping of the batch (the last
step of ``redact_messages``) runs a real other thread that learns the secret, and waits for it.
"""

from __future__ import annotations

import threading

import pytest

from contextfold.manager._secrets import SecretSafeSummarizer
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.redact._ledger import Ledger
from contextfold.summarize import SummaryRequest, SummaryResult

# No pattern finds it: only the memory knows it, once learned. A nonce: no scan or ledger can hold it before.
SECRET = "Qw7zXk2Lp9Rv4Tn6s16sRace"


class _Keeps:
    """A summarizer that keeps the request it was handed."""

    def __init__(self) -> None:
        self.seen: SummaryRequest | None = None

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.seen = request
        return SummaryResult(summary="done")


def test_a_verbatim_text_holding_a_secret_learned_after_the_batch_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()
    users = [f"step {i}: read file_s16s_{i}.py" for i in range(12)]
    users.append(f"the deploy id is {SECRET} for now")
    request = SummaryRequest(messages=tuple(Message.user(text) for text in users), verbatim=tuple(users))
    learned = threading.Event()
    real_keep = Ledger.keep_batch

    def keep_then_learn_elsewhere(self: Ledger, items: list[Message], redacted: tuple[Message, ...],
                                  generation: int) -> None:
        real_keep(self, items, redacted, generation)
        if not learned.is_set() and any(SECRET in m.text for m in items):
            other = threading.Thread(target=lambda: (redactor.learn(SECRET, "api_key"), learned.set()))
            other.start()
            other.join()

    monkeypatch.setattr(Ledger, "keep_batch", keep_then_learn_elsewhere)
    inner = _Keeps()
    SecretSafeSummarizer(inner, redactor).summarize(request)
    assert learned.is_set()  # (the other thread learned it between the redaction and what the summarizer read after)
    assert inner.seen is not None
    assert not any(SECRET in text for text in inner.seen.verbatim), inner.seen.verbatim
    assert inner.seen.verbatim == tuple(redactor.redact_text(text) for text in users)
