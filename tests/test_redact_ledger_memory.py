"""What the redactor keeps of the messages it redacted is bounded by its text, and released when a manager closes.

The ledger (``redact/_ledger.Ledger``) keeps each message a session's redactor redacted with its result, so that the
summarizer's input and every transcript are not scanned again. Its entries outlive the view they came from, and an
entry of a redacted output holds the output and its redacted copy: bounded only by a count (250,000 entries), a
session of large outputs holding secrets kept all of them twice. Neither it nor the placeholders built ahead (the
cache's memo, masked copies of outputs) were released by ``ContextManager.close()``.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from contextfold import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor, SecretMemory, _ledger

NONCE = "s15rledger"
OUTPUT_CHARS = 30_000
OUTPUTS = 40


def _output(i: int) -> Message:
    body = f"{NONCE} run {i}\n" + "the build step passed, nothing to see here\n" * (OUTPUT_CHARS // 43)
    return Message.tool(f"c{i}", body + f"\nexport DB_PASSWORD=Zq{i:04d}{NONCE}Kx9\n", name="bash")


def test_the_ledger_holds_a_bounded_amount_of_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 96ca2cf: every output and its redacted copy stayed alive (40 outputs of 30 KB: 1.2 MB).
    monkeypatch.setattr(_ledger, "LEDGER_CHARS", 1 << 18, raising=False)
    redactor = Redactor().for_session(SecretMemory())
    first = _output(0)
    first_redacted = redactor.redact_message(first)
    assert first_redacted is not first and "Zq0000" not in first_redacted.text
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(1, OUTPUTS):
            m = _output(i)
            assert redactor.redact_message(m) is not m
        del m
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        # What the ledger alone keeps: what replacing it frees (the process-wide scan memo, bounded on its own,
        # keeps texts too).
        redactor._message_redactor.ledger = _ledger.Ledger()
        gc.collect()
        kept = held - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # (the cap is in characters of text, each message and its copy: ASCII here, a byte each)
    assert kept < 2 * (1 << 18), f"{kept / 1e6:.1f} MB kept by the ledger"
    # An entry dropped is only work done again: the same result.
    assert redactor.redact_message(first) == first_redacted


def test_closing_a_manager_releases_the_ledger_and_the_placeholders() -> None:
    # Fails on 96ca2cf: a closed manager (still held by its caller) kept every message it redacted.
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory",
                        session_id=f"{NONCE}-close")
    try:
        for i in range(3):
            cm.add(Message.user(f"look at run {i} {NONCE}"))
            cm.add(Message("assistant", "", tool_calls=(ToolCall(f"c{i}", "bash", '{"cmd": "make"}'),)))
            cm.add(_output(i))
            cm.prepare()
        ledger = cm.redactor._message_redactor.ledger
        assert len(ledger) > 0
        placeholders = cm.cache.placeholders
    finally:
        cm.close()
    assert len(ledger) == 0 and ledger._held_chars() == 0
    assert cm.cache._placeholders is None or cm.cache._placeholders is not placeholders


def test_closing_releases_the_redacted_copies_memory() -> None:
    # The figure behind the test above: what a closed manager's redactor keeps of a session of large redacted
    # outputs (tracemalloc, the manager itself still held by the caller).
    redactor = Redactor().for_session(SecretMemory())
    redactor.redact_text("warm: patterns resolved before the count")
    outputs = [_output(i) for i in range(20)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        redacted = [redactor.redact_message(m) for m in outputs]
        assert all(r is not m for r, m in zip(redacted, outputs, strict=True))
        del redacted
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
        redactor.forget_messages()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept > 20 * OUTPUT_CHARS // 2  # (the redacted copies, kept for the next use)
    assert after < kept / 4, f"{kept / 1e6:.2f} MB kept, {after / 1e6:.2f} MB after forgetting"
