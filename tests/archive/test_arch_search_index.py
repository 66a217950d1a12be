"""``history_search`` reads what was archived since its last call only (s20).

On a9a74c5 every call read every archived transcript and every masked or truncated output whole back through
``resolve_ref``: a session with 10,000 masked outputs made 10,000 blob reads a call. The tool's index keeps what
it read; answers are the same as a fresh search's.
"""

from __future__ import annotations

import json

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.archive.search import HistorySearchTool, history_search
from contextfold.messages import Message, ToolCall

SESSION = "s20g-index"
NONCE = "s20g-index-Hq8"


def _cut_output(k: int) -> Message:
    ref = f"tout_{k:016x}"
    return Message.tool(f"c{k}", f"[masked] ref={ref}", name="cat").with_meta(ref=ref, kind="masked", id=f"m{k}")


def _full_text(ref: str) -> str:
    return "\n".join(f"{ref} line {i} {NONCE if i == 7 else 'plain'}" for i in range(20))


def _call(pattern: str) -> ToolCall:
    return ToolCall("h", "history_search", json.dumps({"pattern": pattern}))


def test_a_call_reads_only_what_was_archived_since_the_last() -> None:
    archive = Archive(MemoryArchiveStore())
    resolved: list[str] = []

    def resolve(ref: str) -> str:
        resolved.append(ref)
        return _full_text(ref)

    first = [Message.user("go").with_meta(id="u"), *(_cut_output(k) for k in range(50))]
    archive.archive_transcript(SESSION, first)
    tool = HistorySearchTool(archive, SESSION, resolve_ref=resolve)
    answer = tool.execute_tool_call(_call(NONCE)).text
    assert answer.startswith("history_search: 50 matching lines") and len(resolved) == 50
    again = tool.execute_tool_call(_call(NONCE)).text
    assert again == answer and len(resolved) == 50  # (a9a74c5: 100, every output read again)
    archive.archive_transcript(SESSION, [*first, _cut_output(50)])
    grown = tool.execute_tool_call(_call(NONCE)).text
    assert grown.startswith("history_search: 51 matching lines") and resolved[50:] == ["tout_0000000000000032"]
    fresh = history_search(NONCE, SESSION, archive=archive, resolve_ref=_full_text, max_results=20).format()
    assert grown == fresh


def test_an_output_not_found_is_asked_for_again() -> None:
    archive = Archive(MemoryArchiveStore())
    archive.archive_transcript(SESSION, [Message.user("go").with_meta(id="u"), _cut_output(1)])
    there: dict[str, str] = {}

    def resolve(ref: str) -> str:
        return there[ref]

    tool = HistorySearchTool(archive, SESSION, resolve_ref=resolve)
    assert tool.execute_tool_call(_call(NONCE)).text.startswith("history_search: 0 matching lines")
    there["tout_0000000000000001"] = _full_text("tout_0000000000000001")
    assert tool.execute_tool_call(_call(NONCE)).text.startswith("history_search: 1 matching line ")
