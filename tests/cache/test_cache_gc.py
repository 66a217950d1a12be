"""Garbage collection: unreferenced outputs go, referenced ones stay, and a byte cap evicts the least recently used."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.cache import ToolOutputCache, referenced_refs
from contextfold.cache._line_index import index_key
from contextfold.messages import Message, ToolCall
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore


@pytest.fixture(params=["memory", "local"])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> ToolOutputCache:
    if request.param == "memory":
        return ToolOutputCache(MemoryBlobStore())
    return ToolOutputCache(LocalBlobStore(tmp_path))


def test_gc_without_cap_deletes_every_unreferenced_output(cache: ToolOutputCache) -> None:
    a, b, c = (cache.put(f"output {k}\n" * 100) for k in "abc")
    result = cache.gc({b.id})
    assert sorted(result.deleted) == sorted([a.id, c.id])
    assert result.bytes_freed == a.byte_size + c.byte_size
    assert result.bytes_kept == b.byte_size and result.kept == 1
    assert cache.ref_ids() == [b.id]
    assert not cache.contains(a.id)


def test_gc_with_cap_evicts_least_recently_used_unreferenced_first(cache: ToolOutputCache) -> None:
    refs = [cache.put(f"output {k}\n" * 100) for k in range(5)]  # equal sizes, put in order 0..4
    size = refs[0].byte_size
    cache.read(refs[0].id, 1, 1)  # reading makes 0 the most recently used
    result = cache.gc({refs[1].id}, max_bytes=3 * size)
    # 1 is referenced; of the rest, 2 and 3 were used least recently.
    assert list(result.deleted) == [refs[2].id, refs[3].id]
    assert sorted(cache.ref_ids()) == sorted([refs[0].id, refs[1].id, refs[4].id])
    assert result.bytes_kept == 3 * size


def test_gc_never_deletes_referenced_outputs_even_over_the_cap(cache: ToolOutputCache) -> None:
    refs = [cache.put(f"output {k}\n" * 100) for k in range(3)]
    result = cache.gc({r.id for r in refs}, max_bytes=0)
    assert result.deleted == ()
    assert len(cache.ref_ids()) == 3


def test_gc_removes_line_indexes_with_their_output_and_orphaned_ones(cache: ToolOutputCache) -> None:
    big = cache.put("".join(f"line {i}\n" for i in range(50_000)))
    assert cache.store.exists(index_key(big.id))
    cache.store.put(index_key("tout_00000000000000aa"), b"orphan from a crashed write")
    cache.store.put("someone-elses-key", b"left alone")
    result = cache.gc(set())
    assert result.deleted == (big.id,)
    assert result.bytes_freed > big.byte_size  # the index is counted too
    assert [e.key for e in cache.store.entries()] == ["someone-elses-key"]


def test_gc_rejects_a_negative_cap(cache: ToolOutputCache) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        cache.gc(set(), max_bytes=-1)


def test_referenced_refs_reads_meta_text_and_arguments() -> None:
    r1, r2, r3 = "tout_" + "1" * 16, "tout_" + "2" * 16, "tout_" + "3" * 16
    messages = [
        Message.tool("c", "[tool output trimmed]", meta={"ref": r1, "kind": "masked"}),
        Message.assistant(f"the summary cites ref={r2} and tout_short"),
        Message.assistant("", [ToolCall("c2", "tool_output_cache", f'{{"ref_id": "{r3}"}}')]),
        Message.user("nothing"),
    ]
    assert referenced_refs(messages) == {r1, r2, r3}


def test_a_view_keeps_its_outputs_through_gc() -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    kept = cache.process(Message.tool("c1", "x\n" * 60_000))
    dropped = cache.process(Message.tool("c2", "y\n" * 60_000))
    cache.gc(referenced_refs([kept]))
    assert cache.get(kept.meta["ref"]) == "x\n" * 60_000
    assert not cache.contains(dropped.meta["ref"])
