"""An event's plain lists become JSON values in one C pass, not an item at a time (issue 22).

The first compaction of 100,000 recorded messages emits a ``MessagesPruned`` naming every message it removed; turning
its ids into a JSON list one recursive call per id was ~0.09 s of the telemetry thread's CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold.telemetry import events
from contextfold.telemetry.events import MessagesPruned, format_time


def _reference(value: Any) -> Any:
    """_jsonable as it was before its fast path."""
    if isinstance(value, Mapping):
        return {str(k): _reference(v) for k, v in value.items()}
    if isinstance(value, tuple | list | frozenset | set):
        return [_reference(v) for v in value]
    if isinstance(value, datetime):
        return format_time(value)
    return value


def test_a_pruned_events_ids_are_not_converted_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = tuple(f"nonce-7f3e-{i}" for i in range(1000))
    event = MessagesPruned(session_id="s", count=len(ids), ids=ids, kept={"recent": 3}, protected=("p",))
    calls = 0
    real = events._jsonable

    def counted(value: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(value)

    monkeypatch.setattr(events, "_jsonable", counted)
    data = event.to_dict()["data"]
    assert data["ids"] == list(ids)
    assert calls < 20  # (the fields and the kept mapping's items, not the 1,000 ids)


_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
                    st.datetimes(timezones=st.just(UTC)))
_values = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple), st.frozensets(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), inner, max_size=3)), max_leaves=12)


@given(_values)
def test_jsonable_gives_what_it_gave(value: Any) -> None:
    got = events._jsonable(value)
    want = _reference(value)
    assert got == want
    assert type(got) is type(want)
