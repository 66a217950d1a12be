"""A digest's ranking in one pass (issue 22, ninth session) equals its specification: every candidate (definitions,
then entities by kind, then bare numbers, each value once, never a word every Python file says) with its place
among them, ranked by kind weight x whole-word mentions, then by that place."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache._digest import (
    _COMMON,
    KIND_WEIGHTS,
    Material,
    _definitions,
    _mention_counts,
    _rank,
    digest_source,
)
from contextfold.summarize.entities import bare_numbers, extract_entities_by_kind


def _rank_plain(text: str) -> Material:
    source, partial = digest_source(text)
    found: dict[str, tuple[str, int]] = {}

    def add(kind: str, values: Iterable[str]) -> None:
        for value in values:
            if value not in found and value not in _COMMON:
                found[value] = (kind, len(found))

    definitions = _definitions(source)
    add("definition", definitions)
    found.update({d.split(":", 1)[0]: ("definition", -1) for d in definitions})
    for kind, values in extract_entities_by_kind(source).items():
        add(kind, values)
    add("number", bare_numbers(source))
    mentions = _mention_counts(source)
    ranked = []
    for value, (kind, order) in found.items():
        if order < 0:
            continue
        name = value.split(":", 1)[0] if kind == "definition" else value
        ranked.append((-(KIND_WEIGHTS.get(kind, 1.0) * max(1, mentions.get(name, 0))), order, value))
    ranked.sort()
    return Material(tuple(value for _, _, value in ranked), partial)


_PIECES = st.sampled_from([
    "   12\tdef parse(", "  3 class Parser:", "  40 async def run", "def", "class", "self", "None", "__init__",
    "parse", "parse.", "/srv/app/x.py", "x.py", "ValueError", "test_parse", "run_all()", "4096", "1.2.3", "12 ms",
    "$5.00", "AB12CD", "HTTP", "`cfg`", "a.b.c", "fooBar", " ", "\n", "\t", ", ", ":", "é", "--flag",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=60).map("".join))
def test_the_ranking_is_its_specification(text: str) -> None:
    text = f"nonce-rank {text}"  # (entities are remembered by text: a text of its own)
    assert _rank(text) == _rank_plain(text)


def test_a_long_output_is_ranked_at_its_ends_as_specified() -> None:
    body = "\n".join(f"{n:6}\tdef handler_{n}(request): return parse_{n % 7}(request, 'ranked')" for n in range(400))
    assert _rank(body) == _rank_plain(body)
    assert _rank(body).partial
