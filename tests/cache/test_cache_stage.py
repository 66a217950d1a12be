"""Outputs staged ahead of their masking (issue 22): the read-ahead encodes, hashes and counts the lines of each
output a masking may take soon (``ToolOutputCache.stage``), so the masking turn's ``put`` of the same text stores it
without doing that again. What is stored, and the ref, are exactly what a plain ``put`` gives; staging writes
nothing to the store."""

from __future__ import annotations

import json
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.cache import _cache as cache_module
from contextfold.cache.masking import placeholder_ahead
from contextfold.messages import Message, ToolCall
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import MessageCounter, TiktokenCounter

_texts = st.text(st.characters(codec="utf-8") | st.sampled_from(["\n", "\r", "\ud800"]), max_size=3000)


@settings(max_examples=60, deadline=None)
@given(_texts)
def test_a_staged_put_stores_what_a_plain_put_stores(text: str) -> None:
    staged, plain = ToolOutputCache(MemoryBlobStore()), ToolOutputCache(MemoryBlobStore())
    ref_id = staged.stage(text)
    assert list(staged.store.entries()) == []  # staging writes nothing
    ref = staged.put(text)
    expected = plain.put(text)
    assert ref == expected and ref.id == ref_id
    assert {e.key: staged.store.get(e.key) for e in staged.store.entries()} == {
        e.key: plain.store.get(e.key) for e in plain.store.entries()}
    assert staged.get(ref.id) == text


def test_put_of_a_staged_text_neither_encodes_nor_hashes_it_again(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    cache = ToolOutputCache(MemoryBlobStore())
    text = f"{uuid.uuid4()} line\n" * 400
    ref_id = cache.stage(text)
    hashed: list[bytes] = []
    original = cache_module.ref_id_for
    monkeypatch.setattr(cache_module, "ref_id_for", lambda data: hashed.append(data) or original(data))
    assert cache.put(text).id == ref_id
    assert hashed == []
    # Taken once: a second put of the text finds it stored (by the ref ids of long texts), not staged.
    assert cache.put(text).id == ref_id


def test_staged_outputs_are_bounded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(cache_module._RefIds, "MAX_STAGED", 3)
    cache = ToolOutputCache(MemoryBlobStore())
    texts = [f"{uuid.uuid4()} output {n}" for n in range(5)]
    for text in texts:
        cache.stage(text)
    assert [cache._ref_ids.staged(t) is not None for t in texts] == [False, False, True, True, True]


def test_the_placeholder_built_ahead_stages_its_output_and_the_masking_stores_it_as_before() -> None:
    nonce = uuid.uuid4().hex
    history = [Message("user", "fix it")]
    for i in range(4):
        history.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"cat f{i}"})),)))
        history.append(Message("tool", "\n".join(f"{nonce} f{i}.py:{n}: value_{n}" for n in range(60)),
                               tool_call_id=f"c{i}", name="bash"))
    history.append(Message("assistant", "done"))
    counter = MessageCounter(TiktokenCounter())
    ahead, cold = ToolOutputCache(MemoryBlobStore()), ToolOutputCache(MemoryBlobStore())
    for m in history:
        if m.role == "tool":
            assert placeholder_ahead(m, ahead, digest_tokens=60, known="", counter=counter.counter) is not None
            assert ahead._ref_ids.staged(str(m.content)) is not None
    options = {"budget_tokens": 0, "counter": counter, "keep_tool_io_pairs": 1, "clear_at_least": 0,
               "digest_tokens": 60}
    masked = mask_tool_outputs(history, cache=ahead, **options)  # type: ignore[arg-type]
    expected = mask_tool_outputs(history, cache=cold, **options)  # type: ignore[arg-type]
    assert masked == expected and len(masked.masked_indices) == 3
    assert {e.key: ahead.store.get(e.key) for e in ahead.store.entries()} == {
        e.key: cold.store.get(e.key) for e in cold.store.entries()}
