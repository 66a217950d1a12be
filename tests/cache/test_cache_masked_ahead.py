"""Masked messages built ahead (issue 22): the read-ahead that builds an output's placeholder also makes the masked
message itself (the placeholder in its place, its kind, ref and stored size), so a masking turn stores the output
and swaps that message in instead of copying it. What the turn writes must be the message a masking without the
read-ahead makes, meta included: for outputs in hand and stored at write time, after secrets learned elsewhere or in
an output, and for a copy of an output that was not the one read ahead."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.cache.masking import placeholder_ahead
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import MessageCounter, TiktokenCounter

_COUNTER = MessageCounter(TiktokenCounter())


def _history(nonce: str, stored: frozenset[int] = frozenset(), cache: ToolOutputCache | None = None) -> list[Message]:
    """Five calls and their outputs; those numbered in ``stored`` were cut at write time (stored, with a ref)."""
    out = [Message("user", f"fix the loader {nonce}")]
    for i in range(5):
        body = "\n".join(f"/srv/{nonce}/pkg_{i}/mod_{n}.py:{n * 13}: ValueError in read_{nonce}_{n}()"
                         for n in range(12))
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"cat pkg_{i}"})),)))
        result = Message("tool", body, tool_call_id=f"c{i}", name="bash", meta={"id": f"{nonce}:{i}"})
        if i in stored and cache is not None:
            ref = cache.put(body)
            result = result.with_content_and_meta(body[:400], kind="truncated", ref=ref.id,
                                                  original_bytes=ref.byte_size)
        out.append(result)
    out.append(Message("assistant", "done"))
    return out


def _cache(redactor: Redactor) -> ToolOutputCache:
    cache = ToolOutputCache(MemoryBlobStore())
    cache.secrets = redactor
    return cache


def _ahead(history: list[Message], cache: ToolOutputCache, redactor: Redactor) -> None:
    calls = {c.id: c.arguments for m in history for c in m.tool_calls}
    for m in history:
        if m.role == "tool":
            placeholder_ahead(m, cache, digest_tokens=40, known=calls[m.tool_call_id or ""], counter=_COUNTER.counter,
                              secrets=redactor)


def _mask(history: list[Message], cache: ToolOutputCache) -> list[Message]:
    result = mask_tool_outputs(history, budget_tokens=0, counter=_COUNTER, cache=cache, keep_tool_io_pairs=1,
                               clear_at_least=0, digest_tokens=40, secrets=cache.secrets)
    assert len(result.masked_indices) == 4
    return result.messages


def test_a_masking_after_the_read_ahead_swaps_in_the_messages_built_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("mA%H%M%S%f")
    redactor = Redactor()
    cache = _cache(redactor)
    history = _history(nonce, frozenset({1}), cache)
    _ahead(history, cache, redactor)
    copies: list[Message] = []
    real = Message.with_content_and_meta

    def copying(self: Message, content: Any, **updates: Any) -> Message:
        copies.append(self)
        return real(self, content, **updates)

    with monkeypatch.context() as patched:
        patched.setattr(Message, "with_content_and_meta", copying)
        warm = _mask(history, cache)
    assert copies == []  # every masked message was built ahead
    cold_cache = _cache(Redactor())
    cold = _mask(_history(nonce, frozenset({1}), cold_cache), cold_cache)
    assert warm == cold  # (meta included: kind, ref, the stored size)
    assert [m.meta.get("original_bytes") for m in warm if m.kind == "masked"] == [
        m.meta.get("original_bytes") for m in cold if m.kind == "masked"]
    assert all(cache.contains(m.meta["ref"]) for m in warm if m.kind == "masked")  # (stored by the turn, as before)


def test_a_copy_of_an_output_read_ahead_is_masked_as_itself() -> None:
    nonce = datetime.now(UTC).strftime("mB%H%M%S%f")
    redactor = Redactor()
    cache = _cache(redactor)
    history = _history(nonce)
    _ahead(history, cache, redactor)
    # The same output text in another message (another id): its placeholder is the one built ahead, its message not.
    history[4] = Message("tool", history[2].text, tool_call_id="c1", name="bash", meta={"id": f"{nonce}:other"})
    warm = _mask(history, cache)
    assert warm[4].meta["id"] == f"{nonce}:other" and warm[4].kind == "masked"
    cold = _mask(history, _cache(Redactor()))
    assert warm == cold


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stored=st.frozensets(st.integers(0, 4), max_size=3),
       picks=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 11), st.integers(0, 50), st.integers(5, 14)),
                      max_size=2),
       elsewhere=st.booleans())
def test_what_a_masking_writes_is_what_it_writes_without_the_read_ahead(
        stored: frozenset[int], picks: list[tuple[int, int, int, int]], elsewhere: bool) -> None:
    nonce = datetime.now(UTC).strftime("mC%H%M%S%f")
    redactor = Redactor()
    cache = _cache(redactor)
    history = _history(nonce, stored, cache)
    _ahead(history, cache, redactor)
    # Secrets learned after the read-ahead: cut from the outputs (some occur in one, some only share a piece with a
    # listed word), or from elsewhere (touching nothing).
    knowing = Redactor()
    bodies = [cache.get(m.meta["ref"]) if m.kind == "truncated" else m.text for m in history if m.role == "tool"]
    secrets = [bodies[k].splitlines()[line][at : at + length] for k, line, at, length in picks]
    if elsewhere:
        secrets.append(f"Qz{nonce.translate(str.maketrans('0123456789', 'QWERTYUIOP'))}Vk")
    for secret in secrets:
        if secret.strip():
            redactor.learn(secret, "password")
            knowing.learn(secret, "password")
    warm = _mask(history, cache)
    cold_cache = _cache(knowing)
    cold = _mask(_history(nonce, stored, cold_cache), cold_cache)
    assert warm == cold


def _alive_with(text: str) -> int:
    """Messages still alive whose content mentions ``text``."""
    import gc

    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Message and isinstance(o.content, str) and text in o.content)


def test_the_memo_does_not_keep_an_output_the_view_no_longer_holds() -> None:
    # The masked message built ahead is matched to its output by identity, without holding the output: once masked
    # (or dropped from the view unmasked), the whole output is freed with the view, not kept by the memo (issue 22).
    nonce = datetime.now(UTC).strftime("mF%H%M%S%f")
    cache = ToolOutputCache(MemoryBlobStore())  # (no redactor: its ledger would keep the messages it redacted)
    history = _history(nonce)
    calls = {c.id: c.arguments for m in history for c in m.tool_calls}
    for m in history:
        if m.role == "tool":
            placeholder_ahead(m, cache, digest_tokens=40, known=calls[m.tool_call_id or ""], counter=_COUNTER.counter)
    assert sum(1 for b in cache.placeholders._entries.values() if b.masked is not None) == 5
    masked = mask_tool_outputs(history, budget_tokens=0, counter=_COUNTER, cache=cache, keep_tool_io_pairs=1,
                               clear_at_least=0, digest_tokens=40).messages
    assert sum(m.kind == "masked" for m in masked) == 4
    del history
    assert _alive_with(f"read_{nonce}_") == 1  # (the last output: still in the masked view)
    del masked
    assert _alive_with(f"read_{nonce}_") == 0
    assert len(cache.placeholders) == 5  # (the placeholders stay: a copy of an output masked later finds its own)
