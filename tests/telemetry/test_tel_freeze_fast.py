"""An event's containers are frozen as they were, with the kept types passed over without an ABC check (issue 22)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from contextfold.telemetry.events import _freeze


def _reference(value: Any) -> Any:
    """_freeze as it was before its fast paths."""
    if type(value) in {str, int, float, bool, type(None)}:
        return value
    if isinstance(value, Mapping) and not isinstance(value, MappingProxyType):
        return MappingProxyType({k: _reference(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_reference(v) for v in value)
    return value


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, MappingProxyType):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple) and not isinstance(a, datetime):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a is b or a == b)


_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
                    st.datetimes(timezones=st.just(UTC)), st.frozensets(st.integers(), max_size=3))
_values = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner), st.dictionaries(st.text(max_size=3), inner, max_size=3),
    st.dictionaries(st.text(max_size=3), inner, max_size=3).map(OrderedDict),
    st.dictionaries(st.text(max_size=3), inner, max_size=3).map(MappingProxyType)), max_leaves=12)


@given(_values)
def test_freeze_gives_what_it_gave(value: Any) -> None:
    assert _same(_freeze(value), _reference(value))


def test_a_dict_is_copied_so_a_later_change_is_not_in_the_event() -> None:
    attributes = {"masked": [1, 2], "tokens": 10}
    frozen = _freeze(attributes)
    attributes["tokens"] = 11
    attributes["masked"].append(3)  # type: ignore[attr-defined]
    assert frozen == {"masked": (1, 2), "tokens": 10}
