"""needs_view remembers its answer for a long text (issue 22), and asks again when what it depends on changes."""

from __future__ import annotations

from dataclasses import replace

from contextfold.cache import ToolOutputCache
from contextfold.stores.memory import MemoryBlobStore
from contextfold.tokens import TiktokenCounter

COUNTER = TiktokenCounter("o200k_base")


def test_the_answer_follows_the_cap_the_window_and_the_config() -> None:
    text = "".join(f"line {i} of a tool output with some words\n" for i in range(1_000))
    tokens = COUNTER.count(text)
    cache = ToolOutputCache(MemoryBlobStore(), counter=COUNTER)
    assert cache.needs_view(text, max_tokens=tokens - 1) and cache.needs_view(text, max_tokens=tokens - 1)
    assert not cache.needs_view(text, max_tokens=tokens)
    cache.context_window = 1_000_000  # a cap of 12,500 tokens
    assert not cache.needs_view(text)
    cache.context_window = 8_000  # 4,166
    assert cache.needs_view(text)  # (asked again: not the answer at 1M)
    cache.config = replace(cache.config, max_message_tokens=tokens * 2)
    assert not cache.needs_view(text)
    cache.config = replace(cache.config, max_line_length=20)
    assert cache.needs_view(text)
