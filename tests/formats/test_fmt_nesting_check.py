"""``check_nesting``: memory linear in its input, and the same verdicts and error texts as the path-per-node walk.

The walk used to push every node with its full path string (``f"{path}.{k}"``), so a deep chain of long keys with
many siblings at the bottom cost path length x siblings: a 0.31 MB request body peaked at 737 MB. The serve front
door runs it on refused bodies and the manager on every item added.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterable, Mapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.errors import InvalidHistory
from contextfold.formats._common import check_nesting

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Peak traced memory allowed per character of the input's JSON: the walk keeps one small entry per pending node
# (about 8 bytes per character on the test item below); the old walk took about 740.
MEMORY_PER_INPUT_CHAR = 32


def _old_check_nesting(value: Any, *, index: int | None = None, limit: int = 128) -> None:
    """The walk as it was before the fix (contextfold 6f2b645), the oracle for the error texts."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[tuple[str, Any]] = ((f"{path}.{k}" if path else str(k), v) for k, v in item.items())
        elif isinstance(item, list | tuple):
            children = ((f"{path}[{i}]", v) for i, v in enumerate(item))
        else:
            continue
        if depth >= limit:
            shown = path if len(path) <= 60 else path[:60] + "…"
            raise InvalidHistory(f"nested deeper than {limit} levels", index=index, field=shown or None)
        stack.extend((child, child_path, depth + 1) for child_path, child in children)


def _verdict(check: Any, value: Any, limit: int) -> tuple[str, str | None] | None:
    try:
        check(value, index=3, limit=limit)
    except InvalidHistory as exc:
        return str(exc), exc.field
    return None


# Keys: empty (the old walk then spells the next key without a dot), short, and long enough to pass the 60-char cut.
KEYS = st.one_of(st.sampled_from(["", "a", ".", "[0]", "k" * 70]), st.text(max_size=25))
NESTED_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=40,
)


@PROPERTY
@given(NESTED_JSON, st.integers(min_value=0, max_value=7))
def test_same_verdict_and_text_as_the_path_per_node_walk(value: Any, limit: int) -> None:
    assert _verdict(check_nesting, value, limit) == _verdict(_old_check_nesting, value, limit)


def test_the_shown_path_of_a_long_chain_is_cut_at_60_characters() -> None:
    value: Any = [[[]]]
    for depth in range(5):
        value = {f"key{depth}-q7nonce" + "y" * 20: value}
    assert _verdict(check_nesting, value, 6) == _verdict(_old_check_nesting, value, 6)
    _, field = _verdict(check_nesting, value, 6) or ("", None)
    assert field is not None and field.endswith("…") and len(field) == 61


def test_memory_stays_linear_in_the_input_for_a_deep_chain_of_long_keys_with_many_siblings() -> None:
    node: Any = {f"s{i}": [] for i in range(3_000)}
    for depth in range(60):
        node = {f"k{depth:03d}-q7nonce" + "x" * 200: node}
    item = {"role": "user", "content": "hi", "meta": node}
    size = len(json.dumps(item))
    tracemalloc.start()
    try:
        check_nesting(item)  # legal: 63 levels
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_PER_INPUT_CHAR * size, (peak, size)
