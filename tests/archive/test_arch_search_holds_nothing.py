"""history_search keeps nothing between calls: what gc collects is not found, and no call's lines stay held.

s20g's tool kept every transcript, cut output and line it had searched (612 MB for 2,000 outputs of 1,280 lines,
against 4 MB) and read only what was archived since its last call; both shipped callers build a tool per call, so
nothing was reused, and an output the cache's gc had deleted was still returned by the same tool (review of s20g).
"""

from __future__ import annotations

import json
import tracemalloc

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive.search import HistorySearchTool
from contextfold.cache import ToolOutputCache
from contextfold.messages import Message, ToolCall
from contextfold.stores import MemoryBlobStore

SESSION = "s"
NONCE = "SECRET-PLAN-7q"


def _cut(ref: str, number: int) -> Message:
    return Message.tool(f"c{number}", f"[masked] ref={ref}", name="cat").with_meta(ref=ref, kind="masked",
                                                                                   id=f"m{number}")


def _search(tool: HistorySearchTool, pattern: str) -> str:
    return tool.execute_tool_call(ToolCall("h", "history_search", json.dumps({"pattern": pattern}))).text


def test_an_output_gc_deleted_is_not_found_by_the_same_tool() -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    ref = cache.put(f"line one\n{NONCE} in the output\nline three").id
    archive = Archive(MemoryArchiveStore())
    archive.archive_transcript(SESSION, [Message.user("go").with_meta(id="u"), _cut(ref, 1)])
    tool = HistorySearchTool(archive, SESSION, resolve_ref=cache.get)
    assert _search(tool, NONCE).startswith("history_search: 1 matching line")
    assert ref in cache.gc(referenced=[]).deleted
    # (s20g: still "1 matching line", read from what the tool kept)
    assert _search(tool, NONCE).startswith("history_search: 0 matching lines")


def test_a_tool_holds_no_searched_lines_after_its_call() -> None:
    outputs, lines = 200, 1_280
    archive = Archive(MemoryArchiveStore())
    refs = [f"tout_{k:016x}" for k in range(outputs)]
    archive.archive_transcript(SESSION, [Message.user("go").with_meta(id="u"),
                                         *(_cut(ref, k) for k, ref in enumerate(refs))])

    def resolve(ref: str) -> str:
        return "\n".join(f"{ref[-6:]}{i:06d}{'y' * 24}" for i in range(lines))

    searched_chars = outputs * lines * 37
    tracemalloc.start()
    try:
        tool = HistorySearchTool(archive, SESSION, resolve_ref=resolve)
        before = tracemalloc.get_traced_memory()[0]
        assert _search(tool, "NOPE").startswith("history_search: 0 matching lines")
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # (s20g: every line kept by the tool, several times what was searched)
    assert held < searched_chars // 10, (held, searched_chars)
