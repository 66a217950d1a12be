"""Outputs of a few long lines (minified JSON, one-line API responses, base64) are cut by structure, never to
"lines 1-1 of 1 omitted"."""

from __future__ import annotations

import base64
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.answered import has_real_content
from contextfold.cache import CacheConfig, ToolOutputCache
from contextfold.messages import Message
from contextfold.stores.memory import MemoryBlobStore
from contextfold.tokens import TiktokenCounter
from contextfold.truncate import cut_by_chars, shape_json

COUNTER = TiktokenCounter("o200k_base")
CAP_TOKENS = 400


def small_cache() -> ToolOutputCache:
    return ToolOutputCache(MemoryBlobStore(), CacheConfig(max_message_tokens=CAP_TOKENS), counter=COUNTER)


def flights(n: int) -> list[dict[str, object]]:
    return [
        {"flight_number": f"HAT{i:03d}", "origin": "JFK", "destination": "SEA", "status": "available",
         "prices": {"economy": 100 + i, "business": 1200 + i}, "date": f"2024-05-{i % 28 + 1:02d}"}
        for i in range(n)
    ]


def body_of(view: str) -> str:
    """The view without the closing cache note."""
    return view.rsplit("\n[tool output cached as ref=", 1)[0]


def test_one_line_json_keeps_its_shape_first_and_last_items_and_counts_what_was_dropped() -> None:
    payload = {"reservation_id": "ZFA04Y", "user_id": "mia_li_3668", "flights": flights(60), "total": 5230}
    text = json.dumps(payload)  # one line, ~3,000 tokens
    cache = small_cache()
    out = cache.process(Message.tool("c1", text))
    assert out.meta["kind"] == "truncated"
    assert "omitted" not in out.text
    assert COUNTER.count(out.text) <= CAP_TOKENS
    shown = json.loads(body_of(out.text))
    # Every top-level key and scalar stays, ids and numbers whole.
    assert (shown["reservation_id"], shown["user_id"], shown["total"]) == ("ZFA04Y", "mia_li_3668", 5230)
    kept = shown["flights"]
    # First items, a marker counting the dropped ones, and the last item.
    assert kept[0] == payload["flights"][0]
    assert kept[-1] == payload["flights"][-1]
    marker = kept[-2]
    assert isinstance(marker, str)
    dropped = int(re.fullmatch(r"…(\d+) more items…", marker).group(1))  # type: ignore[union-attr]
    assert len(kept) - 2 + dropped + 1 == 60
    assert kept[: len(kept) - 2] == payload["flights"][: len(kept) - 2]
    # The whole output is in the cache under the ref the note names.
    assert cache.get(out.meta["ref"]) == text
    assert f"ref={out.meta['ref']}" in out.text


def test_long_strings_in_json_are_shortened_with_their_length_stated() -> None:
    text = json.dumps({"id": "abc123", "log": "x" * 20_000, "n": 7})
    shaped = shape_json(text, lambda s: COUNTER.count(s) <= 200)
    assert shaped is not None
    value = json.loads(shaped)
    assert (value["id"], value["n"]) == ("abc123", 7)
    match = re.search(r"…(\d+) chars…$", value["log"])
    assert match is not None
    assert len(value["log"]) - len(match.group(0)) + int(match.group(1)) == 20_000


def test_shape_json_returns_none_for_text_that_is_not_json() -> None:
    assert shape_json("not json at all", lambda s: True) is None
    assert shape_json("{broken", lambda s: True) is None


def test_one_line_base64_keeps_head_and_tail_by_characters() -> None:
    blob = base64.b64encode(bytes(range(256)) * 200).decode()  # one 68 KB line
    out = small_cache().process(Message.tool("c1", blob))
    body = body_of(out.text)
    match = re.search(r"…(\d+) chars truncated…", body)
    assert match is not None
    head, tail = body[: match.start()], body[match.end() :]
    assert head and tail and blob.startswith(head) and blob.endswith(tail)
    assert len(head) + len(tail) + int(match.group(1)) == len(blob)
    assert COUNTER.count(out.text) <= CAP_TOKENS
    assert "omitted" not in out.text
    assert has_real_content(blob, out.text)


def test_a_few_long_lines_of_plain_text_are_cut_by_characters_not_dropped() -> None:
    lines = [f"record {i}: " + "word " * 900 for i in range(3)]
    text = "\n".join(lines)
    out = small_cache().process(Message.tool("c1", text))
    body = body_of(out.text)
    assert body.startswith("record 0: word")
    assert body.rstrip().endswith("word")
    assert "omitted" not in out.text


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 400), st.integers(60, 2_000))
def test_char_cut_never_exceeds_its_caps_and_keeps_the_ends(size: int, cap: int) -> None:
    text = "".join(f"{i}:é{'z' * (i % 7)} " for i in range(size * 10))
    cut = cut_by_chars(text, max_tokens=cap, max_bytes=cap * 3, counter=COUNTER)
    if cut == text:
        assert COUNTER.count(text) <= cap + 20
        return
    assert COUNTER.count(cut) <= cap
    assert len(cut.encode()) <= cap * 3
    match = re.search(r"…(\d+) chars truncated…", cut)
    assert match is not None
    assert text.startswith(cut[: match.start()]) and text.endswith(cut[match.end() :])


def one_stop_options(n: int) -> list[list[dict[str, object]]]:
    """A tau-bench ``search_onestop_flight`` answer: a list of options, each the pair of flights of a connection."""
    return [[{"flight_number": f"HAT{100 + i}", "origin": "JFK", "destination": "ORD", "status": "available",
              "scheduled_departure_time_est": "06:00:00", "scheduled_arrival_time_est": "09:00:00",
              "date": "2024-05-16", "available_seats": {"basic_economy": 9, "economy": 12, "business": 3},
              "prices": {"basic_economy": 80 + i, "economy": 150 + i, "business": 400 + i}},
             {"flight_number": f"HAT{200 + i}", "origin": "ORD", "destination": "SEA", "status": "available",
              "scheduled_departure_time_est": "11:00:00", "scheduled_arrival_time_est": "13:30:00",
              "date": "2024-05-16", "available_seats": {"basic_economy": 4, "economy": 7, "business": 2},
              "prices": {"basic_economy": 90 + i, "economy": 170 + i, "business": 450 + i}}]
            for i in range(n)]


def _cut_lists_keep_their_ends(original: object, shown: object) -> None:
    """Every list in ``shown`` is its original whole, or its first items, one marker, and its last item."""
    if isinstance(original, dict):
        assert isinstance(shown, dict) and shown.keys() == original.keys()
        for key in original:
            _cut_lists_keep_their_ends(original[key], shown[key])
    elif isinstance(original, list):
        assert isinstance(shown, list)
        markers = [i for i, v in enumerate(shown) if isinstance(v, str) and re.fullmatch(r"…\d+ more items…", v)
                   and not (isinstance(original, list) and v in original)]
        if not markers:
            assert len(shown) == len(original)
            for o, v in zip(original, shown, strict=True):
                _cut_lists_keep_their_ends(o, v)
            return
        assert len(markers) == 1
        at = markers[0]
        assert 1 <= at == len(shown) - 2, f"a cut list starts with its head and ends with its last item: {shown!r}"
        dropped = int(re.findall(r"\d+", shown[at])[0])
        assert at + dropped + 1 == len(original)
        for o, v in zip(original[:at], shown[:at], strict=True):
            _cut_lists_keep_their_ends(o, v)
        _cut_lists_keep_their_ends(original[-1], shown[-1])


def test_a_cut_json_list_keeps_its_head_and_its_last_item() -> None:
    # tau-bench at 4K showed an answered flight search as ["…4 more items…", ["…1 more items…", {last flight}]]:
    # the model saw one of six options, and only the second leg of it.
    options = one_stop_options(6)
    text = json.dumps(options)
    for budget in range(120, 1_200, 20):
        shaped = shape_json(text, lambda s, budget=budget: COUNTER.count(s) <= budget)
        if shaped is None:
            continue  # nothing structured fits: the caller cuts by characters, head first
        shown = json.loads(shaped)
        assert shown[0][0]["flight_number"] == "HAT100", (budget, shaped)
        assert shown[-1][-1]["flight_number"] == "HAT205", (budget, shaped)
        _cut_lists_keep_their_ends(options, shown)


@pytest.mark.parametrize("cap", [400, 500, 600, 700, 800])
def test_a_cut_flight_search_starts_with_its_first_option(cap: int) -> None:
    # From 375 to 675 tokens the old search kept no first item at all: ["…5 more items…", ["…1 more items…",
    # {HAT205}]]. Now a structured cut keeps the first option and the last (from 700 tokens here); below that the
    # JSON is cut by characters, which keeps its head.
    text = json.dumps(one_stop_options(6))
    out = ToolOutputCache(MemoryBlobStore(), CacheConfig(max_message_tokens=cap), counter=COUNTER).process(
        Message.tool("c1", text))
    body = body_of(out.text)
    assert body.startswith('[[{"flight_number"') and '"HAT100"' in body, body[:120]
    if "more items" in body:
        assert '"HAT205"' in body


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=12) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=80,
)


@settings(max_examples=150, deadline=None)
@given(value=json_values, budget=st.integers(min_value=20, max_value=400))
def test_every_cut_list_keeps_its_first_items_and_its_last(value: object, budget: int) -> None:
    shaped = shape_json(json.dumps(value), lambda s: COUNTER.count(s) <= budget)
    if shaped is None:
        return
    _cut_lists_keep_their_ends(value, json.loads(shaped))
