"""Reading cached outputs back: slices by line, grep, the tool schemas and the executor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from contextfold.cache import (
    DEFAULT_READ_LIMIT,
    GREP_TOOL,
    READ_TOOL,
    BlobInfo,
    BlobStore,
    ToolOutputCache,
    retrieval_tool_schemas,
)
from contextfold.cache._line_index import INDEX_CHUNK_BYTES
from contextfold.cache.retrieval import MAX_RESULT_BYTES
from contextfold.messages import ToolCall
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore


class MeteredStore(BlobStore):
    """A real memory store that also counts the bytes handed out by reads."""

    def __init__(self) -> None:
        self.inner = MemoryBlobStore()
        self.bytes_read = 0

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        out = self.inner.read_range(key, start, length)
        self.bytes_read += len(out)
        return out

    def size(self, key: str) -> int | None:
        return self.inner.size(key)

    def delete(self, key: str) -> bool:
        return self.inner.delete(key)

    def entries(self) -> Iterator[BlobInfo]:
        return self.inner.entries()


def lines_of(n: int) -> list[str]:
    return [f"row {i} {'z' * (i % 97)}" for i in range(1, n + 1)]


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ToolOutputCache]:
    store = LocalBlobStore(tmp_path)
    yield ToolOutputCache(store)
    store.close()


def test_read_returns_numbered_lines_like_a_file_read(cache: ToolOutputCache) -> None:
    ref = cache.put("alpha\r\nbeta\r\ngamma\r\n")
    result = cache.read(ref.id, 2, 5)
    assert result.lines == ("beta", "gamma")
    assert result.next_offset is None
    assert result.format() == f"[{ref.id}: lines 2-3 of 3]\n2\tbeta\n3\tgamma"


def test_read_defaults_and_continuation(cache: ToolOutputCache) -> None:
    ref = cache.put("\n".join(lines_of(1_000)))
    first = cache.read(ref.id)
    assert first.offset == 1 and len(first.lines) == DEFAULT_READ_LIMIT
    assert first.next_offset == DEFAULT_READ_LIMIT + 1
    assert f"offset={DEFAULT_READ_LIMIT + 1})" in first.format()
    last = cache.read(ref.id, 990)
    assert last.lines == tuple(lines_of(1_000)[989:])
    assert last.next_offset is None


def test_read_of_a_slice_touches_only_its_neighbourhood() -> None:
    store = MeteredStore()
    cache = ToolOutputCache(store)
    text = "\n".join(lines_of(200_000)) + "\n"  # ~10 MB
    ref = cache.put(text)
    store.bytes_read = 0
    result = cache.read(ref.id, 150_000, 1_000)
    assert result.lines == tuple(lines_of(200_000)[149_999:150_999])
    # The index (8 bytes per 64 KiB) plus a few chunks, not the 10 MB output.
    assert store.bytes_read < 4 * INDEX_CHUNK_BYTES + len(text) // 8192 + 200_000
    assert store.bytes_read < len(text) // 20


def test_read_result_is_capped_in_bytes_and_says_where_to_continue(cache: ToolOutputCache) -> None:
    ref = cache.put("\n".join(["w" * 1_500] * 100))
    assert len(cache.read(ref.id, 1, 100).lines) == 100  # the library reads what it is asked for
    result = cache.read(ref.id, 1, 100, max_bytes=MAX_RESULT_BYTES)
    assert 0 < len(result.lines) < 100
    assert len(result.format().encode()) <= MAX_RESULT_BYTES + 200
    assert result.next_offset == 1 + len(result.lines)


def test_long_lines_are_cut_when_read(cache: ToolOutputCache) -> None:
    ref = cache.put("a" * 100_000 + "\nshort\n")
    result = cache.read(ref.id, 1, 2)
    assert result.lines[0].startswith("a" * 2_000 + "… [line cut: 100,000 bytes]")
    assert result.lines[1] == "short"


@pytest.mark.parametrize(
    ("offset", "limit", "message"),
    [(0, 1, "offset must be"), (11, 1, "past the end: .* has 10 lines"), (1, 0, "limit must be")],
)
def test_bad_reads_raise_clear_errors(cache: ToolOutputCache, offset: int, limit: int, message: str) -> None:
    ref = cache.put("\n".join(lines_of(10)))
    with pytest.raises(ValueError, match=message):
        cache.read(ref.id, offset, limit)


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    line_lengths=st.lists(st.integers(0, 40_000), min_size=1, max_size=40),
    trailing_newline=st.booleans(),
)
def test_any_slice_equals_the_same_lines_of_the_original(
    data: st.DataObject, line_lengths: list[int], trailing_newline: bool
) -> None:
    lines = [chr(ord("a") + i % 26) * n for i, n in enumerate(line_lengths)]
    # An empty last line without a trailing newline reads the same as a trailing newline: the text is ambiguous.
    assume(not (len(lines) > 1 and lines[-1] == "" and not trailing_newline))
    text = "\n".join(lines) + ("\n" if trailing_newline else "")
    cache = ToolOutputCache(MemoryBlobStore())
    ref = cache.put(text)
    if not text:
        assert ref.line_count == 0
        return
    assert ref.line_count == len(lines)
    offset = data.draw(st.integers(1, len(lines)))
    limit = data.draw(st.integers(1, len(lines) + 3))
    got = cache.read(ref.id, offset, limit)
    assert 1 <= len(got.lines) <= limit
    assert got.lines == tuple(got.lines[: len(lines) - offset + 1])
    for k, have in enumerate(got.lines):
        want = lines[offset - 1 + k]
        if len(want) <= 2_000:
            assert have == want
        else:
            assert have.startswith(want[:2_000] + "… [line cut")
    assert len(got.lines) == min(limit, len(lines) - offset + 1)


# -- grep ----------------------------------------------------------------------------------------------------------


def test_grep_one_output_with_context(cache: ToolOutputCache) -> None:
    ref = cache.put("\n".join(["a", "b", "needle 1", "c", "d", "e", "needle 2", "f"]))
    result = cache.grep(r"needle \d", ref.id, context=1)
    assert [(m.line_number, m.line) for m in result.matches] == [(3, "needle 1"), (7, "needle 2")]
    assert result.matches[0].before == ((2, "b"),)
    assert result.matches[0].after == ((4, "c"),)
    assert result.matches[1].after == ((8, "f"),)
    text = result.format()
    assert f"{ref.id}:3:needle 1" in text and f"{ref.id}-2-b" in text and "--" in text


def test_grep_across_every_output_and_max_matches(cache: ToolOutputCache) -> None:
    first = cache.put("error: one\nfine\n")
    second = cache.put("fine\nerror: two\nerror: three\n")
    result = cache.grep("^error")
    assert {(m.ref_id, m.line_number) for m in result.matches} == {(first.id, 1), (second.id, 2), (second.id, 3)}
    assert result.searched == 2 and not result.truncated
    capped = cache.grep("^error", max_matches=2)
    assert len(capped.matches) == 2 and capped.truncated
    assert "there may be more" in capped.format()
    assert cache.grep("nothing here").format() == "no match for /nothing here/ in 2 cached output(s)"


def test_grep_finds_matches_across_chunk_boundaries() -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    body = ["filler " * 10] * 20_000
    body[12_345] = "THE MATCH"
    ref = cache.put("\n".join(body))
    result = cache.grep("THE MATCH", ref.id)
    assert [m.line_number for m in result.matches] == [12_346]


@pytest.mark.parametrize(("kwargs", "message"), [({"pattern": "("}, "invalid regular expression")])
def test_bad_grep_raises_clear_errors(cache: ToolOutputCache, kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cache.grep(**kwargs)


# -- tools ---------------------------------------------------------------------------------------------------------


def test_schemas_in_three_formats() -> None:
    chat = retrieval_tool_schemas("openai_chat")
    responses = retrieval_tool_schemas("openai_responses")
    anthropic = retrieval_tool_schemas("anthropic")
    assert [t["function"]["name"] for t in chat] == [READ_TOOL, GREP_TOOL]  # type: ignore[index]
    assert [t["name"] for t in responses] == [READ_TOOL, GREP_TOOL]
    assert all(t["type"] == "function" for t in chat + responses)
    assert [t["name"] for t in anthropic] == [READ_TOOL, GREP_TOOL]
    read_schema = anthropic[0]["input_schema"]
    assert read_schema["required"] == ["ref_id"]  # type: ignore[index]
    assert set(read_schema["properties"]) == {"ref_id", "offset", "limit"}  # type: ignore[index]
    chat[0]["function"]["name"] = "mutated"  # type: ignore[index]
    assert retrieval_tool_schemas("openai_chat")[0]["function"]["name"] == READ_TOOL  # type: ignore[index]
    with pytest.raises(ValueError, match="format must be one of"):
        retrieval_tool_schemas("gemini")


def test_schemas_are_accepted_by_the_sdk_types() -> None:
    anthropic_types = pytest.importorskip("anthropic.types")
    openai_types = pytest.importorskip("openai.types.chat")
    from pydantic import TypeAdapter

    TypeAdapter(list[anthropic_types.ToolParam]).validate_python(retrieval_tool_schemas("anthropic"))
    TypeAdapter(list[openai_types.ChatCompletionToolParam]).validate_python(retrieval_tool_schemas("openai_chat"))


def test_executor_answers_reads_and_greps(cache: ToolOutputCache) -> None:
    ref = cache.put("\n".join(lines_of(50)))
    read = cache.execute_tool_call(ToolCall("c1", READ_TOOL, json.dumps({"ref_id": ref.id, "offset": 3, "limit": 2})))
    assert (read.role, read.tool_call_id, read.name) == ("tool", "c1", READ_TOOL)
    assert read.text.splitlines()[1:3] == [" 3\trow 3 zzz", " 4\trow 4 zzzz"]
    assert read.text.splitlines()[3] == f'[more: continue with tool_output_cache(ref_id="{ref.id}", offset=5)]'
    grep = cache.execute_tool_call(ToolCall("c2", GREP_TOOL, json.dumps({"pattern": "^row 4[0-9] ", "context": "1"})))
    assert f"{ref.id}:45:row 45 " in grep.text


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        (READ_TOOL, '{"ref_id": "tout_0000000000000000"}', "no cached tool output with ref"),
        (READ_TOOL, '{"ref_id": "../../etc/passwd"}', "no cached tool output with ref"),
        (READ_TOOL, "{}", "ref_id is required"),
        (READ_TOOL, "not json", "not valid JSON"),
        (READ_TOOL, "[1, 2]", "must be a JSON object"),
        (READ_TOOL, '{"ref_id": "REF", "offset": 99}', "past the end"),
        (READ_TOOL, '{"ref_id": "REF", "offset": "x"}', "offset must be an integer"),
        (READ_TOOL, '{"ref_id": "REF", "lines": 3}', "does not take lines"),
        (GREP_TOOL, '{"pattern": "("}', "invalid regular expression"),
        (GREP_TOOL, '{"pattern": "a", "max_matches": 0}', "max_matches must be >= 1"),
        (GREP_TOOL, '{"pattern": ""}', "pattern is required"),
        ("rm_rf", "{}", "unknown tool"),
    ],
)
def test_executor_errors_are_tool_results(cache: ToolOutputCache, name: str, arguments: str, expected: str) -> None:
    ref = cache.put("one\ntwo\n")
    answer = cache.execute_tool_call(ToolCall("c9", name, arguments.replace("REF", ref.id)))
    assert answer.role == "tool" and answer.tool_call_id == "c9"
    assert answer.text.startswith("error: ")
    assert expected in answer.text


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from([READ_TOOL, GREP_TOOL]), arguments=st.text(max_size=80))
def test_executor_never_raises(name: str, arguments: str) -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    cache.put("some\noutput\n")
    answer = cache.execute_tool_call(ToolCall("c", name, arguments))
    assert answer.tool_call_id == "c"
    assert answer.text


