"""A grep over "every cached output" of one session reads every entry of the shared store.

``tool_output_cache_grep`` without a ``ref_id`` searches the outputs the session owns; it finds them by listing the
whole store (every session's outputs, line indexes and claims) and keeping the claims with its tag. In a store shared
by many sessions (the proxy's, 30 days of retention) every such call in every session pays for all of them: with
20,000 outputs of other sessions, a grep in a session owning one output took 0.2 s CPU (memory and SQLite stores
alike), growing linearly with the store (a Redis store listed its whole keyspace). Counted here as the entries
listed.

Fixed in the eleventh session: every store keeps an index of claims by session (``BlobStore.claimed_refs``), so the
grep lists nothing (tests/cache/test_cache_claim_index.py checks each backend and the stores made before it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from contextfold.cache import BlobInfo, ToolOutputCache
from contextfold.messages import ToolCall
from contextfold.stores.memory import MemoryBlobStore

OTHER_SESSIONS = 200
OUTPUTS_EACH = 10


class CountingEntries(MemoryBlobStore):
    listed = 0

    def entries(self) -> Iterator[BlobInfo]:
        for info in super().entries():
            CountingEntries.listed += 1
            yield info


def test_a_grep_of_one_session_s_outputs_does_not_list_the_whole_store() -> None:
    store = CountingEntries()
    for s in range(OTHER_SESSIONS):
        other = ToolOutputCache(store, session_id=f"rt10b-other-{s}")
        for k in range(OUTPUTS_EACH):
            other.put(f"session {s} output {k}\n")
    mine = ToolOutputCache(store, session_id="rt10b-mine")
    mine.put("rt10b line one\nneedle here\n")
    CountingEntries.listed = 0
    answer = mine.execute_tool_call(ToolCall("g", "tool_output_cache_grep", json.dumps({"pattern": "needle"}))).text
    assert answer.splitlines()[0] == "1 match(es) for /needle/ in 1 cached output(s)"
    assert CountingEntries.listed < 100, CountingEntries.listed
