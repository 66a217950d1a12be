"""Red team (issue 21 §5): what the shared scan cache keeps of messages a process has dropped.

Redactors with the same patterns share one scan cache for the process (a fleet worker's or the proxy's managers
come and go; the cache stays). Its findings are bounded by characters (``_SCAN_CACHE_CHARS``), but the messages it
found clean are kept whole, bounded only by count (16,384): 1,500 dropped tool outputs of 117 KB kept 175 MB alive
(tracemalloc, 5894f4b), and at the count bound outputs of that size would keep ~1.9 GB. Here the character bound is
lowered so the test stays small: what is kept must follow it.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from contextfold.messages import Message
from contextfold.redact import Redactor, _scans


def test_messages_found_clean_are_not_kept_past_the_caches_character_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scans, "_SCAN_CACHE_CHARS", 1_000_000)
    monkeypatch.setattr(_scans, "_scan_caches", {})
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(60):
            message = Message("tool", f"line {i} all fine here\n" * 2_000, tool_call_id="c", name="bash")
            assert Redactor().redact_message(message) is message  # clean: nothing to redact
            del message
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert kept < 1_600_000, f"{kept / 1e6:.1f} MB kept for 60 dropped messages of 46 KB (bound: 1M characters)"
