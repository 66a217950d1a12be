"""A grep renders (cuts, guards) only the lines it shows: the matches and their context, not every line read."""

from __future__ import annotations

from contextfold.cache import ToolOutputCache
from contextfold.cache.retrieval import grep_refs
from contextfold.stores.memory import MemoryBlobStore

NONCE = "gr8w"
LINE_LIMIT = 40
LINES = 300


def test_a_grep_renders_only_the_lines_it_shows() -> None:
    lines = [f"{NONCE} line {i} " + "x" * 100 for i in range(LINES)]  # every line over the limit: each is cut
    lines[150] = f"{NONCE} needle " + "y" * 100
    cache = ToolOutputCache(MemoryBlobStore())
    ref = cache.put("\n".join(lines) + "\n")
    cuts: list[str] = []

    def guard(text: str, at: int, keep_head: bool) -> int:
        cuts.append(text)
        return at

    result = grep_refs(cache.store, [ref], "needle", context=2, max_line_length=LINE_LIMIT, guard=guard)
    [match] = result.matches
    assert match.line_number == 151 and match.line == lines[150][:LINE_LIMIT] + "… [line cut: 112 bytes]"
    assert [n for n, _ in match.before] == [149, 150] and [n for n, _ in match.after] == [152, 153]
    assert match.before[0][1] == lines[148][:LINE_LIMIT] + f"… [line cut: {len(lines[148])} bytes]"
    assert len(cuts) == 5  # the match and its four context lines, not the 300 lines read
