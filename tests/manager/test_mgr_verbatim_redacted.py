"""The summary request's verbatim texts take their messages' redaction instead of being scanned again (issue 22).

The user messages a compaction keeps word for word are mostly summarized too (1,462 of the 1,468 verbatim texts of
``bench/bench_compaction.py``): ``SecretSafeSummarizer`` redacted the request's messages in bulk (the prefilter clears
a plain user message without scanning it) and then each verbatim text on its own, scanned cold, ~7% of a cold
compaction. A verbatim text that is a user message's content now takes that message's redacted content, when nothing
was learned in between; the texts are what ``redact_text`` makes of each.
"""

from __future__ import annotations

import pytest

from contextfold.manager._secrets import SecretSafeSummarizer
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.redact._scanner import Scanner
from contextfold.summarize import SummaryRequest, SummaryResult

NONCE = "vb7Rdx2q"  # (unique to this file: no cache of another test answers for it)


class _Keeps:
    """A summarizer that keeps the request it was handed."""

    def __init__(self) -> None:
        self.seen: SummaryRequest | None = None

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.seen = request
        return SummaryResult(summary="done")


def _request(nonce: str) -> SummaryRequest:
    """A request of plain user messages and two with secrets; ``nonce``: each test's own (scans are remembered)."""
    users = [f"step {i}: look at file_{nonce}_{i}.py" for i in range(20)]
    users.append(f"log in with password=Hunter2{NONCE}x please")  # (a secret found in the message)
    users.append(f"the old one was Remembered{NONCE}Value")  # (a remembered one)
    messages = tuple(Message.user(text) for text in users)
    verbatim = (*users, f"not summarized: Remembered{NONCE}Value again", f"kept {nonce} only")
    return SummaryRequest(messages=messages, verbatim=verbatim)


def _redactor() -> Redactor:
    r = Redactor()
    r.learn(f"Remembered{NONCE}Value", "password")
    return r


def test_verbatim_texts_are_what_redact_text_makes_of_them() -> None:
    request = _request(f"{NONCE}a")
    expected = _redactor()
    expected.redact_messages(request.messages)
    wanted = tuple(expected.redact_text(text) for text in request.verbatim)
    inner = _Keeps()
    SecretSafeSummarizer(inner, _redactor()).summarize(request)
    assert inner.seen is not None
    assert inner.seen.verbatim == wanted
    assert f"Hunter2{NONCE}x" not in " ".join(wanted) and f"Remembered{NONCE}Value" not in " ".join(wanted)


def test_verbatim_texts_of_summarized_messages_are_not_scanned_again(monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request(f"{NONCE}b")
    redactor = _redactor()
    scanned: list[str] = []
    real = Scanner.scan

    def counting(self: Scanner, text: str) -> object:
        scanned.append(text)
        return real(self, text)

    monkeypatch.setattr(Scanner, "scan", counting)
    SecretSafeSummarizer(_Keeps(), redactor).summarize(request)
    summarized = {m.text for m in request.messages}
    again = [text for text in scanned if text in summarized]
    # (each summarized text at most once: by the batch when the prefilter does not clear it, never for verbatim)
    assert len(again) == len(set(again))
    assert [t for t in scanned if t.startswith("step ")] == []
