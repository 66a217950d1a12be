"""A clearing is the thread's own: another thread's opening or closing one leaves it as it is (issue 22).

The telemetry thread clears a batch of events' strings while the agent's thread clears a batch of messages': one
shared slot let either end the other's clearing, and its strings were then scanned one by one.
"""

from __future__ import annotations

import threading

import pytest

from contextfold.redact import Redactor

_NONCE = "k3v9w2"


def _strings(tag: str) -> list[str]:
    return [f"{tag}-{_NONCE}-{i}" for i in range(80)]


def test_another_threads_clearing_leaves_this_ones_open(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()
    mine, theirs = _strings("mine"), _strings("theirs")
    scanned: list[str] = []
    spans = Redactor.spans

    def counting(self: Redactor, text: str) -> object:
        scanned.append(text)
        return spans(self, text)

    monkeypatch.setattr(Redactor, "spans", counting)
    opened, closed = threading.Event(), threading.Event()

    def other() -> None:
        with redactor.clearing(theirs):
            opened.set()
            assert closed.wait(10)
            assert [redactor.redact_text(t) for t in theirs] == theirs
        closed.clear()

    with redactor.clearing(mine):
        thread = threading.Thread(target=other)
        thread.start()
        assert opened.wait(10)
        closed.set()
        thread.join(10)
        assert [redactor.redact_text(t) for t in mine] == mine
    assert scanned == []  # (each thread's strings cleared by its own clearing, still open)


def test_a_secret_is_still_redacted_inside_a_clearing_of_another_thread() -> None:
    redactor = Redactor()
    secret = f"password={_NONCE}Qm81xZ"
    done = threading.Event()

    def other() -> None:
        with redactor.clearing(_strings("other")):
            done.set()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    assert done.is_set()
    with redactor.clearing([*_strings("mine"), secret]):
        assert f"{_NONCE}Qm81xZ" not in redactor.redact_text(secret)
        assert redactor.redact_text(f"mine-{_NONCE}-3") == f"mine-{_NONCE}-3"
