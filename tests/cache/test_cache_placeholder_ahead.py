"""Placeholders built ahead (issue 22): the read-ahead builds and counts each output's masked placeholder, so a
masking turn looks it up instead of weighing, checking and counting the digest's items; the placeholder is the same,
and one built before a secret was learned is used after only when that secret touches neither the output nor a
word its digest asked about (then it is the placeholder built afresh)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.cache import masking as masking_module
from contextfold.cache.masking import placeholder_ahead
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import MessageCounter, TiktokenCounter, counting


def _history(nonce: str, secret: str = "") -> list[Message]:
    out = [Message("user", "fix the loader")]
    for i in range(5):
        body = "\n".join(f"/srv/{nonce}/pkg_{i}/module_{n}.py:{n * 17}: KeyError in load_{nonce}_{n}() {secret}"
                         for n in range(30))
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"ls pkg_{i}"})),)))
        out.append(Message("tool", body, tool_call_id=f"c{i}", name="bash"))
    out.append(Message("assistant", "done"))
    return out


def _cache(redactor: Redactor) -> ToolOutputCache:
    cache = ToolOutputCache(MemoryBlobStore())
    cache.secrets = redactor
    return cache


def _ahead(history: list[Message], cache: ToolOutputCache, counter: MessageCounter, redactor: Redactor) -> None:
    calls = {c.id: c.arguments for m in history for c in m.tool_calls}
    for m in history:
        if m.role == "tool":
            placeholder_ahead(m, cache, digest_tokens=40, known=calls[m.tool_call_id or ""], counter=counter.counter,
                              secrets=redactor)


def _mask(history: list[Message], cache: ToolOutputCache, counter: MessageCounter,
          counts: list[int] | None = None) -> list[Message]:
    result = mask_tool_outputs(history, budget_tokens=0, counter=counter, cache=cache, keep_tool_io_pairs=1,
                               clear_at_least=0, digest_tokens=40, secrets=cache.secrets, counts=counts)
    assert len(result.masked_indices) == 4
    return result.messages


def test_a_masking_after_the_read_ahead_writes_the_same_placeholders_and_builds_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")  # texts no other test counted (counts are remembered by text)
    history = _history(nonce)
    counter = MessageCounter(TiktokenCounter())
    redactor = Redactor()
    cache = _cache(redactor)
    _ahead(history, cache, counter, redactor)
    counts = [counter.count_message(m) for m in history]  # (the manager's view keeps them)
    counter.count_message(history[2].with_content(masking_module._PLACEHOLDER_SHAPE))  # (once per process)
    encoded: list[str] = []
    encoding = counting._ENCODINGS.get("o200k_base") or counting._load_encoding("o200k_base")

    class Watched:
        def encode_ordinary(self, text: str) -> Any:
            encoded.append(text)
            return encoding.encode_ordinary(text)

    def no_digest(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("a placeholder built ahead was built again")

    with monkeypatch.context() as patched:
        patched.setitem(counting._ENCODINGS, "o200k_base", Watched())
        patched.setattr(masking_module, "output_digest", no_digest)
        warm = _mask(history, cache, counter, counts)
    assert encoded == []  # every placeholder was counted ahead
    # What a masking without the read-ahead writes: the same placeholders.
    cold = _mask(history, _cache(Redactor()), counter)
    assert [m.text for m in warm] == [m.text for m in cold]
    assert f"/srv/{nonce}/pkg_0/module_0.py" in warm[2].text


def test_a_placeholder_built_before_a_secret_was_learned_is_built_again() -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    secret = f"zq{nonce}Kx9vLmP2rT"
    history = _history(nonce, f"token_{secret}")
    counter = MessageCounter(TiktokenCounter())
    redactor = Redactor()
    cache = _cache(redactor)
    _ahead(history, cache, counter, redactor)
    built = cache.placeholders._entries.values()
    assert any(secret in b.placeholder for b in built)  # (not a secret yet: listed)

    redactor.learn(secret, "password")
    masked = [m.text for m in _mask(history, cache, counter) if m.kind == "masked"]
    assert masked and all(secret[:8] not in text for text in masked)


def _no_digest(*args: Any, **kwargs: Any) -> str:
    raise AssertionError("a placeholder built ahead was built again")


def test_a_placeholder_built_before_a_secret_learned_elsewhere_is_not_built_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    counter = MessageCounter(TiktokenCounter())
    history = _history(nonce)
    redactor = Redactor()
    cache = _cache(redactor)
    _ahead(history, cache, counter, redactor)
    # Learned from another message (issue 22: the masking turns after one built every placeholder again); unique,
    # and sharing no piece with the outputs (the nonce's digits as capitals).
    secret = f"Qv{nonce.translate(str.maketrans('0123456789', 'QWERTYUIOP'))}Zk"
    redactor.learn(secret, "password")
    with monkeypatch.context() as patched:
        patched.setattr(masking_module, "output_digest", _no_digest)
        warm = _mask(history, cache, counter)
    knowing = Redactor()
    knowing.learn(secret, "password")
    assert [m.text for m in warm] == [m.text for m in _mask(history, _cache(knowing), counter)]


_COUNTER = MessageCounter(TiktokenCounter())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 29), st.integers(0, 60), st.integers(5, 14),
                                st.sampled_from(["", "Zx9", "_q7"])), min_size=1, max_size=3))
def test_a_placeholder_kept_across_learned_secrets_is_the_one_built_afresh(
        picks: list[tuple[int, int, int, int, str]]) -> None:
    # Secrets cut from the outputs themselves (a name, a piece of a path or a number, with or without something
    # around it): some occur in an output, some only share a piece with a word a digest lists, some touch nothing.
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    history = _history(nonce)
    outputs = [m.text for m in history if m.role == "tool"]
    secrets = []
    for output, line, at, length, around in picks:
        text = outputs[output].splitlines()[line]
        secrets.append(f"{around}{text[at : at + length]}{around[::-1]}")
    redactor = Redactor()
    cache = _cache(redactor)
    _ahead(history, cache, _COUNTER, redactor)
    knowing = Redactor()
    for secret in secrets:
        redactor.learn(secret, "password")
        knowing.learn(secret, "password")
    warm = _mask(history, cache, _COUNTER)
    cold = _mask(history, _cache(knowing), _COUNTER)
    assert [m.text for m in warm] == [m.text for m in cold]


def test_a_message_masking_never_takes_has_no_placeholder() -> None:
    counter = TiktokenCounter()
    cache = _cache(Redactor())
    assert placeholder_ahead(Message("user", "hello"), cache, digest_tokens=40, known="", counter=counter) is None
    assert placeholder_ahead(Message("tool", "x", tool_call_id="c"), cache, digest_tokens=0, known="",
                             counter=counter) is None
    assert len(cache.placeholders) == 0
