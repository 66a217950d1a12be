"""The read-ahead clears a digest's items in bulk (issue 22): ``Redactor.clean_words`` answers "no" for the items
the prefilter clears and no remembered secret touches, and only the others are asked (and scanned) one by one. The
placeholders are those a cold masking builds asking every item, and none lists a planted secret."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redact_corpus import CODE, SECRETS

from contextfold.cache import ToolOutputCache
from contextfold.cache._digest import Material
from contextfold.cache.masking import placeholder_ahead
from contextfold.manager._compactor import warm_for_compaction
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import TiktokenCounter

_COUNTER = TiktokenCounter()
_PLANTED = [s.text for s in SECRETS]
_VALUES = [v for s in SECRETS for v in s.values]
_FILLER = [c.text for c in CODE[:40]] + [
    "/testbed/django/contrib/admin/options.py", "sympy/core/tests/test_basic.py", "task_runner.py", "RefreshToken",
    "api_key", "keys_value", "see https://github.com/org/repo/issues/3", "   12\tdef load_token(self):",
    "   40\tclass AccessToken:", "Message 12 (pass 3)", "ValueError: bad key",
]


def _outputs(nonce: str, bodies: list[str]) -> list[Message]:
    out: list[Message] = []
    for i, body in enumerate(bodies):
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"ls {nonce}_{i}"})),)))
        out.append(Message("tool", f"{body}\nload_{nonce}_{i} took {i + 100} ms", tool_call_id=f"c{i}",
                           name="bash"))
    return out


def _placeholders(history: list[Message], cache: ToolOutputCache, redactor: Redactor) -> list[str | None]:
    calls = {c.id: c.arguments for m in history for c in m.tool_calls}
    return [placeholder_ahead(m, cache, digest_tokens=40, known=calls[m.tool_call_id or ""], counter=_COUNTER,
                              secrets=redactor) for m in history if m.role == "tool"]


def _cold(history: list[Message]) -> list[str | None]:
    """What a masking without the read-ahead writes: every item asked of a redactor that knows what the session does."""
    redactor = Redactor()
    redactor.redact_messages(history)
    return _placeholders(history, ToolOutputCache(MemoryBlobStore()), redactor)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies=st.lists(st.lists(st.sampled_from(_PLANTED) | st.sampled_from(_FILLER), min_size=1, max_size=4)
                       .map("\n".join), min_size=1, max_size=3))
def test_placeholders_built_ahead_are_the_cold_ones_and_list_no_planted_secret(bodies: list[str]) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    history = _outputs(nonce, bodies)
    redactor, cache = Redactor(), ToolOutputCache(MemoryBlobStore())
    redactor.redact_messages(history)  # (as add() does past half the soft threshold)
    warm_for_compaction(history, False, redactor, False, cache, 40, _COUNTER)
    ahead = _placeholders(history, cache, redactor)  # (looked up: built by the read-ahead)
    assert ahead == _cold(history)
    for placeholder in ahead:
        assert placeholder is not None
        digest = placeholder.partition(" mentioned: ")[2]
        assert not [v for v in _VALUES if v in digest and v in "\n".join(bodies)]


_words = st.lists(st.sampled_from(_VALUES) | st.sampled_from(_FILLER) | st.text(max_size=24)
                  | st.builds(lambda v, a, b: v[a:a + b], st.sampled_from(_PLANTED), st.integers(0, 80),
                              st.integers(1, 40)), max_size=24)


@settings(max_examples=60, deadline=None)
@given(words=_words, learned=st.lists(st.sampled_from(_VALUES), max_size=2))
def test_a_word_cleared_in_bulk_is_one_the_redactor_says_mentions_no_secret(words: list[str],
                                                                            learned: list[str]) -> None:
    redactor, reference = Redactor(), Redactor()
    for value in learned:
        redactor.learn(value, "password")
        reference.learn(value, "password")
    clean = redactor.clean_words(words)
    assert clean <= set(words)
    assert not [w for w in clean if reference.mentions_secret(w)]
    assert all(not redactor.mentions_secret(w) for w in clean)  # (its remembered answers are the same)


def test_the_read_ahead_asks_no_cleared_item_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    bodies = ["\n".join(f"/srv/{nonce}/pkg_{i}/module_{n}.py:{n * 13}: KeyError in load_{nonce}_{n}()"
                        for n in range(25)) for i in range(4)]
    history = _outputs(nonce, bodies)
    redactor, cache = Redactor(), ToolOutputCache(MemoryBlobStore())
    asked: list[str] = []
    ask = Redactor.mentions_secret

    def counted(self: Redactor, text: str) -> Any:
        asked.append(text)
        return ask(self, text)

    monkeypatch.setattr(Redactor, "mentions_secret", counted)
    warm_for_compaction(history, False, redactor, False, cache, 40, _COUNTER)
    monkeypatch.undo()
    built = _placeholders(history, cache, redactor)
    assert all(f"/srv/{nonce}/pkg_" in (p or "") for p in built)
    assert asked == []  # (no item holds a trigger or a base64 run: every one was cleared in bulk)
    assert built == _cold(history)


def test_the_read_ahead_blanks_each_output_once_and_a_material_read_before_a_secret_is_not_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    history = _outputs(nonce, [f"/srv/{nonce}/pkg_{i}/module.py: KeyError in load_{nonce}_{i}()" for i in range(3)])
    redactor, cache = Redactor(), ToolOutputCache(MemoryBlobStore())
    blanked: list[str] = []
    blank = Redactor.blank

    def counted(self: Redactor, text: str) -> str:
        blanked.append(text)
        return blank(self, text)

    monkeypatch.setattr(Redactor, "blank", counted)
    warm_for_compaction(history, False, redactor, False, cache, 40, _COUNTER)
    monkeypatch.undo()
    assert len(blanked) == 3  # (the placeholder took the material the read-ahead read, at the same state)

    # Read before a secret was learned: the placeholder reads the output again, with the secret blanked.
    output = history[1]
    stale = (Material((f"load_{nonce}_0", "stale"),), redactor.digest_state())
    redactor.learn(f"load_{nonce}_0", "password")
    built = placeholder_ahead(output, ToolOutputCache(MemoryBlobStore()), digest_tokens=40, known="",
                              counter=_COUNTER, secrets=redactor, material=stale)
    assert built is not None and "stale" not in built and f"load_{nonce}_0" not in built
