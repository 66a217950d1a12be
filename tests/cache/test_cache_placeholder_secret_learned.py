"""Light placeholders built ahead, then a secret learned (issue 22, eighteenth session, lane Q).

The secret guarantee comes first: a value the session learns is never in a placeholder a masking writes, those built
ahead before it was learned included. Within it, a placeholder is built again on the agent's thread only when what
was learned can change it: a light placeholder of an output too long to read lists nothing, so it never is (before,
a learned value found in the output had the masking turn read the stored output back, blank it whole and build the
same placeholder again); one that lists, or asked about, a word holding the value is."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.cache import masking as masking_module
from contextfold.cache._light_digest import LIGHT_MAX_CHARS
from contextfold.cache.masking import placeholder_ahead
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.redact.memory import forms
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import MessageCounter, TiktokenCounter

COUNTER = MessageCounter(TiktokenCounter("o200k_base"))
DIGEST_TOKENS = 40


def _nonce() -> str:
    return datetime.now(UTC).strftime("%H%M%S%f")  # texts no other test read (entities and counts are remembered)


def _cache(redactor: Redactor) -> ToolOutputCache:
    cache = ToolOutputCache(MemoryBlobStore())
    cache.secrets = redactor
    return cache


def _short(nonce: str, i: int, value: str = "") -> str:
    return "\n".join(f"/srv/{nonce}/pkg_{i}/mod_{n}.py:{n * 7}: KeyError in load_{nonce}_{n}() {value}"
                     for n in range(12))


def _long(nonce: str, i: int, value: str = "") -> str:
    text = "\n".join(f"/srv/{nonce}/big_{i}/file_{n}.py:{n * 3}: ok run_{nonce}_{n} {value}" for n in range(80))
    assert len(text) > LIGHT_MAX_CHARS
    return text


def _history(outputs: list[str]) -> list[Message]:
    out = [Message("user", "fix the loader")]
    for i, text in enumerate(outputs):
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"ls pkg_{i}"})),)))
        out.append(Message("tool", text, tool_call_id=f"c{i}", name="bash"))
    out.append(Message("assistant", "done"))
    return out


def _ahead(history: list[Message], cache: ToolOutputCache, redactor: Redactor) -> None:
    calls = {c.id: c.arguments for m in history for c in m.tool_calls}
    for m in history:
        if m.role == "tool":
            placeholder_ahead(m, cache, digest_tokens=DIGEST_TOKENS, known=calls[m.tool_call_id or ""],
                              counter=COUNTER.counter, secrets=redactor, digest_kind="light")


def _mask(history: list[Message], cache: ToolOutputCache) -> list[Message]:
    result = mask_tool_outputs(history, budget_tokens=0, counter=COUNTER, cache=cache, keep_tool_io_pairs=0,
                               clear_at_least=0, digest_tokens=DIGEST_TOKENS, digest_kind="light",
                               secrets=cache.secrets)
    assert len(result.masked_indices) == sum(1 for m in history if m.role == "tool")
    return [m for m in result.messages if m.kind == "masked"]


def test_a_placeholder_listing_nothing_is_not_built_again_when_a_secret_is_learned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    n = _nonce()
    value = f"Vq{n}Zr8mKw"  # in the long output only, and not a secret when its placeholder is built
    history = _history([_long(n, 0, f"tag={value}")])
    redactor = Redactor()
    cache = _cache(redactor)
    _ahead(history, cache, redactor)
    built = next(iter(cache.placeholders._entries.values()))
    assert built.masked is not None and "mentioned:" not in built.placeholder

    redactor.learn(value, "password")  # (learned from another message: now found in the long output)
    built_here: list[str] = []

    def light_digest(*args: Any, **kwargs: Any) -> Any:
        built_here.append(args[0])
        raise AssertionError("a placeholder listing nothing was built again")

    def read_back(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the stored output was read back to check a placeholder listing nothing")

    with monkeypatch.context() as patched:
        patched.setattr(masking_module, "light_digest", light_digest)
        patched.setattr(cache, "get", read_back)
        masked = _mask(history, cache)
    assert built_here == []
    assert masked == [built.masked[1]] and masked[0] is built.masked[1]  # the message built ahead, swapped in
    knowing = Redactor()
    knowing.learn(value, "password")
    assert [m.text for m in masked] == [m.text for m in _mask(history, _cache(knowing))]
    assert value not in masked[0].text


def test_a_placeholder_listing_a_value_learned_later_is_built_again_without_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    n = _nonce()
    value = f"deploy_key_{n}_Xq9"  # an entity the light digest lists, not a secret when it is built
    listing = f"KeyError while loading {value}\n" + "".join(f"retry {i} of {value} failed in worker_{n}\n"
                                                            for i in range(20))
    history = _history([listing, _long(n, 1, value)])
    redactor = Redactor()
    cache = _cache(redactor)
    _ahead(history, cache, redactor)
    assert any(value in b.placeholder for b in cache.placeholders._entries.values())

    redactor.learn(value, "password")
    built_again: list[str] = []
    light_digest = masking_module.light_digest

    def counted(text: str, **kwargs: Any) -> Any:
        built_again.append(text)
        return light_digest(text, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(masking_module, "light_digest", counted)
        masked = _mask(history, cache)
    assert built_again == [history[2].text]  # the listing one only: the long output's lists nothing
    assert all(value not in m.text and value[:12] not in m.text for m in masked)
    knowing = Redactor()
    knowing.learn(value, "password")
    assert [m.text for m in masked] == [m.text for m in _mask(history, _cache(knowing))]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(picks=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 11), st.integers(0, 50), st.integers(6, 16),
                                st.sampled_from(["", "Zx9", "_q7"])), min_size=1, max_size=3),
       learn_after=st.booleans())
@example(picks=[(0, 0, 0, 6, "Zx9"), (0, 0, 47, 6, "")], learn_after=False)  # (" load_": too short to remember)
def test_no_learned_value_is_ever_in_a_light_placeholder_sent(picks: list[tuple[int, int, int, int, str]],
                                                              learn_after: bool) -> None:
    # Secrets cut from the outputs themselves (a listed word, a piece of a path, a line of a long output), learned
    # after the placeholders were built ahead (or before, to compare): none is ever in what a masking writes, and
    # each placeholder is the one built afresh by a session that knew them from the start.
    n = _nonce()
    outputs = [_short(n, 0), _long(n, 1), _short(n, 2), _long(n, 3)]
    secrets = []
    for output, line, at, length, around in picks:
        text = outputs[output].splitlines()[line]
        secrets.append(f"{around}{text[at : at + length]}{around[::-1]}")
    # A value the memory refuses (under its minimum length once stripped, as " load_" is) is learned by no session:
    # it is in every placeholder, the knowing session's too, and is no secret this test can ask about.
    secrets = [secret for secret in secrets if forms(secret)]
    assume(secrets)
    history = _history(outputs)
    redactor = Redactor()
    cache = _cache(redactor)
    if not learn_after:
        for secret in secrets:
            redactor.learn(secret, "password")
    _ahead(history, cache, redactor)
    for secret in secrets:
        redactor.learn(secret, "password")
    masked = _mask(history, cache)
    for m in masked:
        assert not [s for s in secrets if s in m.text.split("mentioned:", 1)[-1]]
    knowing = Redactor()
    for secret in secrets:
        knowing.learn(secret, "password")
    assert [m.text for m in masked] == [m.text for m in _mask(history, _cache(knowing))]
