"""A digest reads a long output's two ends (issue 22); the edges of those windows never split a secret (issue 21 §1).

An output of one long line (minified JSON, a log without newlines) has no line end inside the windows: cut there
mid-word, a token straddling an edge left a piece (``ghp_A1b2C3d4E5f6G7h8I9j``) that no rule recognises, and a
redactor that remembers nothing (``remember=False``) let it into the placeholder.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import ToolOutputCache, _digest
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores.memory import MemoryBlobStore
from contextfold.tokens import counter_for_model

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
HEAD, TAIL = _digest.DIGEST_HEAD_CHARS, _digest.DIGEST_TAIL_CHARS


def _pieces(item: str) -> bool:
    """Whether ``item`` holds a piece of TOKEN (5 characters or more) but not all of it."""
    if TOKEN in item:
        return False
    return any(TOKEN[i : i + 5] in item for i in range(len(TOKEN) - 4))


def _one_line(at: int, *, length: int = 12_000, joiner: str = " ") -> str:
    """A line of ``length`` characters with TOKEN starting at ``at`` (words joined by ``joiner``)."""
    before = joiner.join(f"w{i}" for i in range(at))[: at - len(joiner)] + joiner
    text = f"{before}{TOKEN}{joiner}"
    filler = joiner.join(f"item{i}" for i in range(length))
    return (text + filler)[:length]


@settings(max_examples=20, deadline=None)
@given(edge=st.sampled_from(["head", "tail"]), offset=st.integers(1, len(TOKEN) - 1),
       joiner=st.sampled_from([" ", ",", '","', "\t"]))
def test_no_window_edge_leaves_a_piece_of_a_token(edge: str, offset: int, joiner: str) -> None:
    length = 12_000
    at = HEAD - offset if edge == "head" else length - TAIL - offset
    text = _one_line(at, length=length, joiner=joiner)
    assert text[at : at + len(TOKEN)] == TOKEN
    source, partial = _digest.digest_source(text)
    assert partial
    assert not _pieces(source), (edge, offset, joiner)
    assert [item for item in _digest.digest_material(text).items if _pieces(item)] == []


def test_a_stored_one_line_output_is_digested_without_a_piece_of_a_token() -> None:
    redactor = Redactor(remember=False)  # (nothing remembered: the item alone must be recognised, or absent)
    cache = ToolOutputCache(MemoryBlobStore())
    cache.secrets = redactor
    at = HEAD - 17
    text = ("ticket ACC-7731 " + "the " * at)[: at - 1] + f" {TOKEN} " + "and " * 1_500  # (one other item)
    ref = cache.put(text).id
    view = [Message.user("go"),
            Message("assistant", "", tool_calls=(ToolCall("c1", "q", "{}"),)),
            Message.tool("c1", text).with_meta(ref=ref),
            Message("assistant", "", tool_calls=(ToolCall("c2", "q", "{}"),)), Message.tool("c2", "small")]
    result = cache.mask(view, counter=counter_for_model("gpt-4o"), budget_tokens=0,
                        keep_tool_io_pairs=0, clear_at_least=0, digest_tokens=400)
    placeholder = result.messages[2].text
    assert placeholder.startswith(f"[tool output trimmed; ref={ref}; its first and last lines mentioned: ACC-7731")
    assert not _pieces(placeholder), placeholder


def test_long_lines_still_give_a_digest_from_both_ends() -> None:
    # Minified JSON: no space anywhere; its delimiters are where a window may end.
    text = json.dumps([{"id": f"REC-{i:05d}", "path": f"/srv/app/m{i}.py"} for i in range(400)],
                      separators=(",", ":"))
    assert "\n" not in text and len(text) > HEAD + TAIL
    items = set(_digest.digest_material(text).items)
    assert {"REC-00000", "REC-00399"} <= items, sorted(items)[:20]


def test_an_output_of_a_few_thousand_characters_is_read_at_its_two_ends() -> None:
    # Issue 22: the read-ahead spent ~2/3 of its digest material on outputs longer than 3,000 characters; a
    # 40-token digest lists a dozen items, found in the first 2,000 and the last 1,000 characters (whole lines).
    head = "\n".join(f"/srv/zq41/head_{n}.py: ok" for n in range(20))
    middle = "\n".join(f"zq41_middle_{n} = {n}" for n in range(300))
    tail = "FAILED tests/test_zq41.py::test_settle\nZq41TailError: ACC-4131"
    text = f"{head}\n{middle}\n{tail}"
    assert len(text) < 8_000  # (read whole by the 6,000 + 2,000 windows before)
    source, partial = _digest.digest_source(text)
    assert partial and len(source) <= 3_001
    assert source.startswith(head) and source.endswith(tail)
    items = _digest.digest_material(text).items
    assert "/srv/zq41/head_0.py" in items and "ACC-4131" in items
    assert "zq41_middle_150" not in items
