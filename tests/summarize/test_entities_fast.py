"""Entity extraction runs its rules the fast way (issue 15): the results must be those of the plain way.

``_extract_plain`` runs every rule of ``entities._RULES`` over the whole text, one after the other, as extraction
did before; ``_extract`` skips rules by literal, reads distinct words and rewrites the number pattern. Both are
compared on every message of the recorded sessions and on generated text built from the characters the rules
care about (word boundaries, path and number punctuation, units, escapes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.importers import load_sessions
from contextfold.summarize import entities
from contextfold.summarize.entities import _extract, _extract_plain

_PIECES = st.sampled_from([
    " ", "  ", "\n", "\t", "\r\n", "\\n", "\\t", "/", "./", "../", "~/", ".", "..", "-", "--", "_", "@", "+", "<", ">",
    "(", ")", "()", "`", "$", ",", ":", "::", "T", "v", "0", "1", "12", "2024-05-20", "10:30", "3.5", "1.2.3", "ms",
    "s", "GB", "%", "x", "a", "py", ".py", "test", "Test", "_test", "test_", "Error", "Exception", "Value", "JFK",
    "HAT136", "Makefile", "README", "src", "foo", "Foo", "fooBar", "é", "https://", "http", "://", "e.g", "1st",
    "mia.li@example.com", "tests/a.py::T::t", "[", "]", "'", '"', "\u2028", "\xa0", "\x1c", "\x1f", "٣",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_the_fast_extraction_equals_the_rules_run_plainly_on_generated_text(text: str) -> None:
    assert _extract(text) == _extract_plain(text)


def test_the_fast_extraction_equals_the_rules_run_plainly_on_recorded_messages(trajectories: Path) -> None:
    # Every 16th message of each set (the whole of them, 13 s, is bench/bench_entities.py's identity check).
    checked = 0
    for folder in ("sweagent-lm32b", "sweagent-claude4sonnet", "taubench-airline/gpt-4o-airline.json"):
        for session in load_sessions(trajectories / folder):
            for message in session.messages[::16]:
                texts = [message.text, *(call.arguments for call in message.tool_calls)]
                for text in texts:
                    assert _extract(text) == _extract_plain(text), text[:200]
                    checked += 1
    assert checked > 600


def test_a_file_listing_with_many_paths_is_read_as_the_rules_read_it() -> None:
    # Many words holding paths, each repeated (read once, remembered by word).
    listing = "\n".join(f"./src/pkg{i % 7}/module_{i % 300}.py  size {i} KB, see src/pkg{i % 7}/module_{i % 300}.py"
                        for i in range(1_000))
    assert _extract(listing) == _extract_plain(listing)
    assert len(_extract(listing)["path"]) > 300


@pytest.mark.parametrize("text", [
    "a@b.c@d.e", "x.y+z@ex-ample.com. and more", "@@ @a.b a@@b.c", "mail mia.li@example.com,bob@x.org;",
    "@decorator\ndef f(): pass  # see a_b@c-d.io", "first.last+tag@sub.example.co.uk@", ".@a.b _@c.d -@e.f",
    "é@example.com x@é.com", "https://u@host.com/p then u@host.com", "a" * 300 + "@example.com",
])
def test_addresses_are_read_where_the_at_signs_are_as_the_rule_reads_them(text: str) -> None:
    assert _extract(text) == _extract_plain(text)


def test_only_dotted_words_with_a_file_tail_are_read_as_bare_file_names() -> None:
    text = "self.value 1.5 end. os.path.join(a.py) x.json: y.tar.gz z.pyc w.py-x v.py_y Makefile.am README.md"
    assert _extract(text) == _extract_plain(text)
    assert {"a.py", "x.json", "y.tar.gz", "Makefile", "README.md"} <= set(_extract(text)["path"])


# Where a number may cross whitespace ("3 s", "12,\tfiles", "2024-05-20 10:30"), words are read together; elsewhere a
# word's findings are remembered by the word (issue 22). Pieces that put numbers, units and claimed spans side by side.
_ACROSS_PIECES = st.sampled_from([
    " ", "\t", "\n", "\r\n", "  ", "\u2028", "0", "7", "12", "3.5", "1,", ",", "2024-05-20", "10:30", "10:30:45", "T",
    "ms", "s", "sec", "x", "%", "GB", "USD", "files", "tests", "items", "/tmp/a/b", "%/tmp/a/b", "a.py", "$", "v1.2.3",
    "--flag", "foo", "Bar", "a_b", "(", ")", ".", "-", "https://x.io/p", "m@x.io", "\x1c", "\x1e", "\xa0",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(_ACROSS_PIECES, max_size=24).map("".join))
def test_numbers_across_whitespace_are_read_as_the_rules_read_them(text: str) -> None:
    assert _extract(text) == _extract_plain(text)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_ACROSS_PIECES | _PIECES, max_size=16).map("".join), min_size=2, max_size=4))
def test_what_is_remembered_by_word_does_not_change_what_a_text_gives(texts: list[str]) -> None:
    # Each text read after the others (its words remembered from them) gives what it gives read from nothing.
    for text in texts:
        _extract(text)
    for text in texts:
        remembered = _extract(text)
        entities._unit_memo.clear()
        assert remembered == _extract(text) == _extract_plain(text)


def test_the_words_remembered_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entities, "_UNIT_MEMO_BYTES", 20_000)
    monkeypatch.setattr(entities, "_unit_memo_bytes", 0)
    entities._unit_memo.clear()
    for i in range(200):
        text = " ".join(f"w{i}_{j} /p{i}/q{j}.py {j}{i} ms" for j in range(10))
        assert _extract(text) == _extract_plain(text)
        assert entities._unit_memo_bytes <= 20_000
    assert 0 < len(entities._unit_memo) < 200 * 30
    assert "w199_9" in entities._unit_memo  # the newest words stay (the older half goes first)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\n", "\r\n", " ", "\t", "\r", "\u2028", "12", "7", "x", "a1", "-", "4096", "3.5"]),
                max_size=20).map("".join))
def test_line_numbers_are_dropped_as_the_listing_pattern_drops_them(text: str) -> None:
    assert entities._without_line_numbers(text) == entities._LISTING_PREFIX.sub(" ", text)


# ASCII text is read with the patterns compiled re.ASCII (issue 22): on ASCII text they match what the Unicode
# patterns match, but for \s, which there holds the separators \x1c-\x1f too (such a text keeps the Unicode ones).
@settings(max_examples=300, deadline=None)
@given(st.lists(_ACROSS_PIECES | _PIECES, max_size=24).map("".join))
def test_ascii_text_reads_as_the_unicode_patterns_read_it(text: str) -> None:
    entities._unit_memo.clear()
    assert _extract(text) == _extract_plain(text)
    plain = entities._BARE_NUMBER.findall(entities._without_line_numbers(text))
    assert entities.bare_numbers(text) == plain


def _accept_path_as_written_first(value: str) -> bool:
    """``entities._accept_path`` as the specification first wrote it (a test of every character, every segment)."""
    if value.startswith(("/", "~", ".")):
        return any(c.isalnum() for c in value)
    if "/" not in value:
        return True
    segments = [s for s in value.split("/") if s]
    return len(segments) >= 3 or any("." in s or "_" in s for s in segments)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["/", "//", "~", ".", "..", "_", "-", "+", "@", "a", "Z", "7", "é", "٣", "²", "ǅ",
                                 "k7nq", "src", "a.py"]), max_size=12).map("".join))
def test_a_path_is_accepted_as_the_first_definition_accepts_it(value: str) -> None:
    # (values the path rule can give: word characters, which are alphanumeric or "_", and its punctuation)
    assert entities._accept_path(value) == _accept_path_as_written_first(value)


def test_every_path_the_rule_finds_in_recorded_messages_is_accepted_as_first_defined(trajectories: Path) -> None:
    values = {match.group().rstrip(entities._TRAILING)
              for session in load_sessions(trajectories / "sweagent-lm32b")[:8] for m in session.messages
              for match in entities._PATH.finditer(m.text)}
    assert len(values) > 1_000
    assert [v for v in values if entities._accept_path(v) != _accept_path_as_written_first(v)] == []
