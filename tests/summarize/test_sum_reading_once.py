"""What contextfold reads of a message is read once, when it is added (issue 22), and kept without the text.

Compactions, masking and the read-ahead assemble the readings: a compaction after add() runs no extraction, and
gives the summary it gives when it reads every message itself. The memos are bounded by bytes and keep no text
alive (a 3,000-turn session grew by 436 MB with whole texts as keys).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import _memo
from contextfold.cache import _digest
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.summarize import digest as digest_module
from contextfold.summarize import entities
from contextfold.summarize.digest import last_lines
from contextfold.tokens import TiktokenCounter

COUNTER = TiktokenCounter("o200k_base")


def session(turns: int) -> list[Message]:
    out = [Message.system("You fix bugs."), Message.user("Fix the failing test_parser in src/app/parse.py; "
                                                          "never touch setup.cfg.")]
    for i in range(turns):
        call = ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"grep -n parse_{i} src/app/parse.py"}))
        listing = "\n".join(f"{n:>6}\tdef parse_{i}_{n}(value): return value.split(':') # ValueError {n * 37}"
                            for n in range(i * 40, i * 40 + 60))
        out += [Message.assistant(f"I will look at parse_{i} because the test fails.", [call]),
                Message.tool(f"c{i}", listing + f"\nFAILED tests/test_parse.py::test_parse_{i} - KeyError",
                             name="bash")]
    return out


def manager() -> ContextManager:
    return ContextManager("gpt-4o", max_context_tokens=30_000, store="memory", archive="memory",
                          session_id="read-once", message_id_prefix="m",
                          policy={"auto": False, "tool_output_budget_tokens": 10_000_000})


def forget_readings() -> None:
    entities._cache.clear()
    digest_module._readings.clear()
    digest_module._outcome_memo.clear()
    _digest._materials.clear()


def test_a_compaction_after_add_reads_no_text_and_summarizes_as_one_that_reads_everything(
        monkeypatch: pytest.MonkeyPatch) -> None:
    forget_readings()
    cold = manager()
    cold.add(session(12))
    forget_readings()  # (as if the messages had been added without being read)
    expected = cold.compact(force=True)
    assert expected.summary is not None

    forget_readings()
    warm = manager()
    warm.add(session(12))  # reads every message

    added = {m.text for m in session(12)}
    read_again: list[str] = []
    extract = entities._extract

    def recording(text: str) -> dict[str, list[str]]:
        read_again.append(text)
        return extract(text)

    monkeypatch.setattr(entities, "_extract", recording)
    report = warm.compact(force=True)
    assert report.summary is not None
    # Only what the compaction itself wrote is read (the "[earlier conversation compacted]" placeholder).
    assert not [t for t in read_again if any(t in a for a in added)], read_again
    assert report.summary.summary == expected.summary.summary
    assert [m.text for m in warm.messages()] == [m.text for m in cold.messages()]
    cold.close()
    warm.close()


def test_a_view_far_under_the_soft_threshold_is_not_read_on_add() -> None:
    forget_readings()
    cm = ContextManager("gpt-4o", store="memory", archive="memory", session_id="small")  # a 128K window
    cm.add(session(3))
    assert not any(digest_module.is_read(m) for m in cm.messages() if m.role != "system")
    cm.close()


def test_the_memos_hold_no_text() -> None:
    text = "".join(f"/srv/app/module_{i}.py:{i} ValueError in handler_{i}\n" for i in range(2_000))
    before = sys.getrefcount(text)
    entities.extract_entities_by_kind(text)
    digest_module.read_message(Message.tool("c1", text))
    _digest.digest_material(text)
    assert sys.getrefcount(text) == before


def test_a_memo_drops_the_least_recently_used_once_over_its_bytes() -> None:
    memo: _memo.TextMemo[tuple[str, ...]] = _memo.TextMemo(max_bytes=3_000)
    for i in range(20):
        value = (f"value {i}" * 10,)
        memo.put(_memo.text_key(f"text {i}"), value, _memo.size_of_strings(value))
        assert memo.bytes <= 3_000
    assert memo.get(_memo.text_key("text 19")) is not None
    assert memo.get(_memo.text_key("text 0")) is None
    memo.put(_memo.text_key("huge"), ("x" * 5_000,), 5_050)  # larger than the whole memo: not kept
    assert memo.get(_memo.text_key("huge")) is None


def test_a_huge_text_is_read_at_its_ends() -> None:
    head = "start_marker /srv/first.py\n"
    middle = "filler words without names\n" * 40_000  # over a million characters
    tail = "\nTraceback: end_marker_error in /srv/last.py"
    found = entities.extract_entities(head + middle + tail)
    assert {"/srv/first.py", "/srv/last.py", "start_marker", "end_marker_error"} <= found


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["ab", "\n", "\r\n", "\r", "\x0b", "\u2028", " ", "x"]), max_size=300),
       st.integers(1, 8))
def test_last_lines_are_those_of_splitlines(pieces: list[str], count: int) -> None:
    text = "".join(pieces)
    original = digest_module._TAIL_PROBE_CHARS
    digest_module._TAIL_PROBE_CHARS = 4  # small, so that the probe doubles (and cuts "\r\n") on short texts
    try:
        assert last_lines(text, count) == text.splitlines()[-count:]
    finally:
        digest_module._TAIL_PROBE_CHARS = original


def _candidates(source: str) -> dict[str, tuple[str, int]]:
    """Value -> (kind, place): definitions, then entities by kind, then bare numbers (a defined name itself: -1)."""
    found: dict[str, tuple[str, int]] = {}

    def add(kind: str, values: list[str]) -> None:
        for value in values:
            if value not in found and value not in _digest._COMMON:
                found[value] = (kind, len(found))

    definitions = _digest._definitions(source)
    add("definition", definitions)
    found.update({d.split(":", 1)[0]: ("definition", -1) for d in definitions})
    for kind, values in entities.extract_entities_by_kind(source).items():
        add(kind, values)
    add("number", entities.bare_numbers(source))
    return found


def _digest_plainly(text: str, budget_tokens: int, known: str) -> str:
    """The masked output's digest as it was computed before its material was remembered (filter, then rank)."""
    source, _ = _digest.digest_source(text)
    # (Whole words counted one by one, a sentence's dot stripped: what _mention_counts computes in bulk.)
    mentions = Counter(word.rstrip(".") for word in re.split(r"[^\w.$/-]+", source) if word)
    ranked = []
    for value, (kind, order) in _candidates(source).items():
        if order < 0 or (known and value in known):
            continue
        name = value.split(":", 1)[0] if kind == "definition" else value
        ranked.append((-_digest.KIND_WEIGHTS.get(kind, 1.0) * max(1, mentions.get(name, 0)), order, value))
    ranked.sort()
    items: list[str] = []
    spent, misses = 0, 0
    for _, _, value in ranked:
        cost = COUNTER.count(value) + (COUNTER.count(_digest.DIGEST_SEPARATOR) if items else 0)
        if spent + cost > budget_tokens:
            misses += 1
            if misses >= _digest.MAX_MISSES:
                break
            continue
        items.append(value)
        spent += cost
    return _digest.DIGEST_SEPARATOR.join(items)


WORDS = ["src/app.py", "ValueError", "def", "end.", "...", "x.y.", "parse_value", "12:", "1121", "HAT227", "the",
         "ZFA04Y", "2024-05-24",
         "class", "Config", "--verbose", "https://example.org/a", "\n", "   755\t", "x.y.z", "42 ms"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=80), st.lists(st.sampled_from(WORDS), max_size=4),
       st.integers(0, 40))
def test_a_digest_from_remembered_material_is_the_digest_read_plainly(words: list[str], known: list[str],
                                                                        budget: int) -> None:
    text = " ".join(words)
    known_text = " ".join(known)
    expected = _digest_plainly(text, budget, known_text) if budget > 0 else ""
    assert _digest.output_digest(text, budget_tokens=budget, counter=COUNTER, known=known_text) == expected


OUTCOME_PIECES = ["ERROR", "Error", "xError", "OK", " OK", "passed", "failed", "exit code 1", "not found", "ok",
                  "Traceback", "error:", "errors", "Success", "\n", "\n", "  ", "x" * 250, "word"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(OUTCOME_PIECES), max_size=120))
def test_outcome_lines_are_the_lines_the_pattern_finds(pieces: list[str]) -> None:
    text = " ".join(pieces)
    plain = tuple(line.strip() for line in text.splitlines()[-digest_module.OUTCOME_TAIL_LINES:]
                  if line.strip() and len(line.strip()) <= digest_module.MAX_OUTCOME_LINE_CHARS
                  and digest_module._OUTCOME.search(line.strip()))
    assert digest_module._read_outcome_lines(text) == plain
