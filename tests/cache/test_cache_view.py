"""Write-time caching: refs, the in-context view of a big tool output, and the cache config."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import (
    DEFAULT_MAX_LINE_LENGTH,
    DEFAULT_MAX_MESSAGE_BYTES,
    CacheConfig,
    ToolOutputCache,
    is_ref_id,
    ref_id_for,
)
from contextfold.errors import ConfigError, RefNotFound
from contextfold.messages import ImagePart, Message, TextPart
from contextfold.stores.memory import MemoryBlobStore
from contextfold.tokens import TiktokenCounter

COUNTER = TiktokenCounter("o200k_base")


def numbered(n: int, width: int = 30) -> str:
    return "".join(f"{i:06d} {'x' * (i % width)}\n" for i in range(1, n + 1))


def test_ref_ids_are_content_addresses_stable_across_processes() -> None:
    text = "same output\n" * 10
    here = ToolOutputCache(MemoryBlobStore()).put(text).id
    there = subprocess.run(
        [
            sys.executable,
            "-c",
            "from contextfold.cache import ToolOutputCache; from contextfold.stores.memory import MemoryBlobStore; "
            f"print(ToolOutputCache(MemoryBlobStore()).put({text!r}).id)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert here == there
    assert is_ref_id(here)
    assert here == ref_id_for(text.encode())
    assert ToolOutputCache(MemoryBlobStore()).put(text + "!").id != here


def test_put_counts_lines_and_bytes_and_dedupes() -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    a = cache.put("α\nb\nc")  # no trailing newline: still three lines
    assert (a.byte_size, a.line_count) == (len("α\nb\nc".encode()), 3)
    assert cache.put("α\nb\nc") == a
    assert cache.ref_ids() == [a.id]
    assert cache.put("").line_count == 0
    assert cache.put("x\n").line_count == 1


def test_ref_lookup_without_memo_reads_the_store() -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    big = numbered(20_000)
    ref = cache.put(big)
    fresh = ToolOutputCache(cache.store)
    assert fresh.ref(ref.id) == ref
    assert fresh.ref(cache.put("small\n").id).line_count == 1
    with pytest.raises(RefNotFound):
        fresh.ref("tout_0000000000000000")
    with pytest.raises(RefNotFound):
        fresh.ref("not-a-ref")


def test_small_outputs_and_other_roles_pass_through_unchanged() -> None:
    cache = ToolOutputCache(MemoryBlobStore(), counter=COUNTER)
    small = Message.tool("c1", "ok\n", name="bash")
    assert cache.process(small) is small
    user = Message.user("x" * (DEFAULT_MAX_MESSAGE_BYTES * 2))
    assert cache.process(user) is user
    off = ToolOutputCache(MemoryBlobStore(), config=CacheConfig(enabled=False))
    big = Message.tool("c2", numbered(10_000))
    assert off.process(big) is big
    assert cache.ref_ids() == []


def test_big_output_becomes_a_view_with_head_tail_and_a_note() -> None:
    cache = ToolOutputCache(MemoryBlobStore(), counter=COUNTER, context_window=200_000)
    text = numbered(20_000)
    message = Message.tool("call_9", text, name="bash", meta={"label": "keep me"})
    out = cache.process(message)
    ref_id = out.meta["ref"]
    assert out.meta["kind"] == "truncated"
    assert out.meta["original_bytes"] == len(text.encode())
    assert out.meta["label"] == "keep me"
    assert (out.tool_call_id, out.name, out.role) == ("call_9", "bash", "tool")
    view = out.text
    assert len(view.encode()) <= DEFAULT_MAX_MESSAGE_BYTES
    assert COUNTER.count(view) <= cache.config.message_tokens(200_000)
    lines = view.split("\n")
    assert lines[0] == "000001 x"
    assert lines[-2] == "020000 " + "x" * (20_000 % 30)
    marker = re.search(r"\[\.\.\. lines (\d+)-(\d+) of 20000 omitted", view)
    assert marker is not None
    first, last = int(marker.group(1)), int(marker.group(2))
    # The head ends just before the omitted range and the tail starts right after it.
    assert lines[first - 2].startswith(f"{first - 1:06d} ")
    assert lines[first].startswith(f"{last + 1:06d} ")
    assert f"ref={ref_id}" in lines[-1]
    assert "tool_output_cache(" in lines[-1] and "tool_output_cache_grep(" in lines[-1]
    assert cache.get(ref_id) == text
    assert cache.process(out) is out  # already cached: never cached twice


def test_long_lines_are_cut_in_the_view_but_kept_whole_in_the_cache() -> None:
    cache = ToolOutputCache(MemoryBlobStore(), counter=COUNTER)
    text = "short\n" + "y" * 5_000 + "\nend\n"
    out = cache.process(Message.tool("c", text))
    first, second, third = out.text.split("\n")[:3]
    assert (first, third) == ("short", "end")
    assert second.startswith("y" * DEFAULT_MAX_LINE_LENGTH + "…3000 chars truncated…")
    assert cache.get(out.meta["ref"]) == text


def test_token_cap_applies_when_bytes_are_under_the_byte_cap() -> None:
    config = CacheConfig(max_message_tokens=500)
    cache = ToolOutputCache(MemoryBlobStore(), config=config, counter=COUNTER)
    text = "".join(f"token soup {i} alpha beta gamma\n" for i in range(600))  # ~20 KB, ~6,000 tokens
    assert len(text.encode()) < DEFAULT_MAX_MESSAGE_BYTES
    out = cache.process(Message.tool("c", text))
    assert out.meta["kind"] == "truncated"
    assert COUNTER.count(out.text) <= 500


def test_parts_content_is_cached_when_all_text_and_left_alone_otherwise() -> None:
    cache = ToolOutputCache(MemoryBlobStore(), counter=COUNTER)
    text = numbered(10_000)
    parts = Message("tool", (TextPart(text),), tool_call_id="c")
    assert cache.process(parts).meta["kind"] == "truncated"
    mixed = Message("tool", (TextPart(text), ImagePart(url="https://x/y.png")), tool_call_id="c")
    assert cache.process(mixed) is mixed


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=3_000), min_size=1, max_size=300),
    max_bytes=st.integers(2_000, 20_000),
    max_tokens=st.integers(400, 5_000),
    max_line=st.integers(20, 2_000),
)
def test_views_always_fit_every_cap_and_the_original_is_kept(
    lines: list[str], max_bytes: int, max_tokens: int, max_line: int
) -> None:
    text = "\n".join(lines)
    config = CacheConfig(max_message_bytes=max_bytes, max_message_tokens=max_tokens, max_line_length=max_line)
    cache = ToolOutputCache(MemoryBlobStore(), config=config, counter=COUNTER)
    out = cache.process(Message.tool("c", text))
    if out.meta.get("ref") is None:
        assert len(text.encode()) <= max_bytes and COUNTER.count(text) <= max_tokens
        assert all(len(line) <= max_line for line in text.split("\n"))
        return
    assert len(out.text.encode()) <= max_bytes
    assert COUNTER.count(out.text) <= max_tokens
    assert cache.get(out.meta["ref"]) == text


# -- config --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "budget"),
    [(None, 20_000), (32_000, 20_000), (128_000, 32_000), (200_000, 50_000), (1_000_000, 60_000)],
)
def test_budget_is_a_clamped_quarter_of_the_window(window: int | None, budget: int) -> None:
    assert CacheConfig().budget_tokens(window) == budget
    # a quarter of the budget, then the 1.2 serialization buffer (000 §Decision 3)
    assert CacheConfig().message_tokens(window) == int(budget // 4 / 1.2)
    assert CacheConfig(serialization_buffer=1.0).message_tokens(window) == budget // 4
    assert CacheConfig(context_budget_tokens=7_000).budget_tokens(window) == 7_000


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_message_bytes", 0), ("max_line_length", -5), ("context_budget_tokens", 1.5), ("max_message_tokens", True)],
)
def test_bad_config_names_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        CacheConfig(**{field: value})  # type: ignore[arg-type]
    assert info.value.field == f"cache.{field}"


# -- the outline of the omitted lines ------------------------------------------------------------------------------


def abbreviated_file_view(classes: int) -> str:
    """SWE-agent's abbreviated view of a long file: numbered lines, bodies replaced by elision lines."""
    out = ["OBSERVATION:", "<NOTE>This file is too large to display entirely. Showing abbreviated version.</NOTE>"]
    line = 1
    for c in range(classes):
        out.append(f"{line:6d} class Model{c}(Base):")
        out.append(f"{line + 1:6d}     def update(self, **kwargs):")
        out.append(f"{line + 2:6d} ... eliding lines {line + 2}-{line + 20} ...")
        out.append(f"{line + 21:6d}     update.alters_data = True")
        out.append(f"{line + 22:6d} ")
        line += 23
    return "\n".join(out) + "\n"


def outline_of(view: str) -> list[str]:
    start = view.index("their outline (definitions, elisions, errors) follows ...]\n")
    body = view[start:].split("\n", 1)[1]
    return body[: body.index("\n[... end of the outline of lines ")].split("\n")


def test_the_outline_joins_each_elision_to_the_line_it_follows_and_drops_the_padding() -> None:
    cache = ToolOutputCache(MemoryBlobStore(), CacheConfig(max_message_tokens=1_500), counter=COUNTER)
    text = abbreviated_file_view(60)
    view = cache.view_for(text, cache.put(text))
    outline = outline_of(view)
    first = int(outline[0].split()[0])
    # the first class the head left out: the one before it is in the head, with its padding
    assert re.fullmatch(r"\d+ class Model\d+\(Base\):", outline[0])
    assert f"{first - 23:6d} class Model" in view.split("[... lines ", 1)[0]
    # class, then its method with the elided body joined (one entry, both line numbers), in file order
    assert outline[:2] == [f"{first} class Model{(first - 1) // 23}(Base):",
                           f"{first + 1}     def update(self, **kwargs): (lines {first + 2}-{first + 20} elided)"]
    assert all(not entry[:1].isspace() for entry in outline)
    assert not any("eliding lines" in entry for entry in outline)
    # the first entries that fit, in order: consecutive classes, none skipped
    classes = [int(e.split("Model", 1)[1].split("(", 1)[0]) for e in outline if " class Model" in e]
    assert classes == list(range(classes[0], classes[0] + len(classes))) and len(classes) >= 5
    # within its share of the view's budget (a fifth of what is left after the notes)
    assert COUNTER.count("\n".join(outline)) <= 0.2 * (cache.config.message_tokens() - 200) + len(outline)


def test_an_elision_that_does_not_follow_its_opening_line_stays_an_entry_of_its_own() -> None:
    lines = ["    1 import os", *[f"{i:5d} x = {i}" for i in range(2, 300)], "  300 ... eliding lines 300-340 ...",
             *[f"{i:5d} y = {i}" for i in range(341, 600)]]
    text = "\n".join(lines) + "\n"
    cache = ToolOutputCache(MemoryBlobStore(), CacheConfig(max_message_tokens=1_200), counter=COUNTER)
    view = cache.view_for(text, cache.put(text))
    assert outline_of(view) == ["300 ... eliding lines 300-340 ..."]


def test_a_log_keeps_its_errors_in_the_outline() -> None:
    lines = [f"step {i}: ok" for i in range(400)]
    lines[150] = "Traceback (most recent call last):"
    lines[151] = "ValueError: bad input at row 17"
    text = "\n".join(lines) + "\n"
    cache = ToolOutputCache(MemoryBlobStore(), CacheConfig(max_message_tokens=800), counter=COUNTER)
    view = cache.view_for(text, cache.put(text))
    assert outline_of(view) == ["Traceback (most recent call last):", "ValueError: bad input at row 17"]


def test_a_view_rendered_again_after_a_secret_was_learned_does_not_cut_that_secret() -> None:
    """Views are remembered by ref (a bulk add meets the same outputs again), but not across what the redactor learns.

    The first view cuts a long line through a value nothing recognises yet; once the session has learned that value,
    the same output is rendered anew and the cut moves to the secret's start (no piece of it is left).
    """
    from contextfold.redact import Redactor

    secret = "Zq8Kx3Vm7Wp2Rt9Yb4Nc6Hd"
    line = "x" * 1990 + secret + "y" * 500
    text = "\n".join([line] + [f"line {i}" for i in range(20)])
    redactor = Redactor()
    cache = ToolOutputCache(MemoryBlobStore(), CacheConfig(max_line_length=2000))
    cache.secrets = redactor
    first = cache.process(Message.tool("t1", text))
    assert secret[:10] in first.text  # cut at 2,000 characters, inside the value
    again = cache.process(Message.tool("t2", text))
    assert again.text == first.text  # nothing learned: the same view (remembered)
    redactor.learn(secret, "password")
    after = cache.process(Message.tool("t3", text))
    assert after.meta["ref"] == first.meta["ref"]
    assert secret[:10] not in after.text
