"""Entities read word by word, remembered by word, are what the rules read over the whole text (red team, eighth
session, af4661b; held).

af4661b cuts a text into units (whitespace-separated words; words a number joins across one whitespace character
stay one unit) and remembers each unit's findings process-wide. What is attacked here: every kind of whitespace
``str.split`` and ``\\s`` agree on (the file/group/record separators, NEL, the line separator, no-break and ideographic
spaces, a vertical tab), JSON escapes, Unicode digits (``\\d`` takes them), numbers, units, dates and times on both
sides of each, claimed spans (paths, URLs, addresses) next to numbers and units, numbered listings, redaction
markers; each text read cold, after the others (its words remembered from other contexts), and again. The reference
is the rules run over the whole text (``_extract_plain``, the specification) and, for bare numbers, the listing
pattern applied as a regex. Hunted with 11,000 texts in three orders against 44ddfa8 in a subprocess (entities,
bare numbers, digest material, message readings: 0 differences); committed at a modest size.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.summarize import entities
from contextfold.summarize.entities import _extract, _extract_plain, bare_numbers

_WHITESPACE = [" ", "\t", "\n", "\r\n", "  ", "\x1c", "\x1f", "\x85", "\u2028", "\u00a0", "\u3000", "\x0b", "\\n",
               "\\t"]
_UNITS = ["ms", "s", "sec", "seconds", "h", "days", "B", "KiB", "MB", "%", "px", "tokens", "lines", "USD", "dollars",
          "passengers", "files", "tests", "GHz", "x", "S", "Ms", "files_x", "s/tmp/a", "%/tmp/a/b", "sx"]
_NUMBERS = ["0", "7", "12", "4096", "1,000", "1,", "3.5", ".5", "$12.50", "$7", "2024-05-20", "2024-05-20T10:30",
            "10:30", "10:30:45", "v1.2.3", "1.2.3-rc1", "V2.0.1", "3rd", "12th", "٣٤٥", "１２３", "0x1F", "-12", "1e10"]
_WORDS = ["/testbed/django/db/client.py", "./a.py", "~/conf.yaml", "a/b/c", "and/or", "client.py", "Makefile",
          "README.md", "https://example.com/a?b=1", "s3://bucket/k", "mia.li@example.com", "tests/a.py::TestX::test_y",
          "--verbose", "---x", "ValueError:", "TestCase", "test_foo", "foo_test", "`runshell_db`", "self.value",
          "e.g.", "snake_case", "_private", "CamelCase", "camelCase", "HTTP", "ABC123", "foo()", "bar(", "a1b2c3d4",
          "[REDACTED:password]", "é", "字", "naïve_var", "x86_64", "(", ")", ",", ".", ":", "$", "/", "%", "@", "-"]
_PIECE = st.one_of(st.sampled_from(_WHITESPACE), st.sampled_from(_UNITS), st.sampled_from(_NUMBERS),
                   st.sampled_from(_WORDS),
                   # (a number, one whitespace character, what may be its unit or its time: a unit of two words)
                   st.tuples(st.sampled_from(_NUMBERS), st.sampled_from(_WHITESPACE),
                             st.sampled_from(_UNITS + _NUMBERS)).map("".join))
_TEXT = st.lists(_PIECE, max_size=24).map("".join)


def _numbered(text: str, lines: int) -> str:
    return "\n".join(f"{n:6d}\t{text}" for n in range(1, lines + 1))


def _bare_numbers_plain(text: str) -> list[str]:
    return entities._BARE_NUMBER.findall(entities._LISTING_PREFIX.sub(" ", entities.readable(text)))


@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=4), st.integers(0, 3))
def test_each_text_reads_as_the_rules_read_it_whatever_was_read_before(texts: list[str], listing: int) -> None:
    if listing:
        texts = [_numbered(text, listing) for text in texts]
    entities._unit_memo.clear()
    cold = [_extract(text) for text in texts]  # (each after the ones before it: their words remembered)
    for text, first in zip(reversed(texts), reversed(cold), strict=True):
        assert _extract(text) == first == _extract_plain(text), text
        assert bare_numbers(text) == _bare_numbers_plain(text), text
