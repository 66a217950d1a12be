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
from contextfold.summarize.entities import _extract, _extract_plain

_PIECES = st.sampled_from([
    " ", "  ", "\n", "\t", "\r\n", "\\n", "\\t", "/", "./", "../", "~/", ".", "..", "-", "--", "_", "@", "+", "<", ">",
    "(", ")", "()", "`", "$", ",", ":", "::", "T", "v", "0", "1", "12", "2024-05-20", "10:30", "3.5", "1.2.3", "ms",
    "s", "GB", "%", "x", "a", "py", ".py", "test", "Test", "_test", "test_", "Error", "Exception", "Value", "JFK",
    "HAT136", "Makefile", "README", "src", "foo", "Foo", "fooBar", "é", "https://", "http", "://", "e.g", "1st",
    "mia.li@example.com", "tests/a.py::T::t", "[", "]", "'", '"', "\u2028", "\xa0",
])


@settings(max_examples=2_000, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_the_fast_extraction_equals_the_rules_run_plainly_on_generated_text(text: str) -> None:
    assert _extract(text) == _extract_plain(text)


def test_the_fast_extraction_equals_the_rules_run_plainly_on_every_recorded_message(trajectories: Path) -> None:
    checked = 0
    for folder in ("sweagent-lm32b", "sweagent-claude4sonnet", "taubench-airline/gpt-4o-airline.json"):
        for session in load_sessions(trajectories / folder):
            for message in session.messages:
                texts = [message.text, *(call.arguments for call in message.tool_calls)]
                for text in texts:
                    assert _extract(text) == _extract_plain(text), text[:200]
                    checked += 1
    assert checked > 10_000


def test_a_file_listing_with_many_paths_is_read_as_the_rules_read_it() -> None:
    # Past _FIND_MAX_WORDS words holding paths, their occurrences are blanked by one split of the text instead.
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
