"""A copy made by ``Message.with_meta`` owns a plain dict, whatever mapping a caller's read-only view shows.

Found attacking the eighth session (77a7ee0, issue 22): ``with_meta`` copies a ``MappingProxyType`` meta with the
view's ``copy()``, which is the ``copy()`` of whatever mapping is behind it. Over a caller's own ``Mapping`` that has
none, every ``with_meta`` (``add()`` gives each message its id this way) raised ``AttributeError``; over a
``defaultdict`` the copy's "read-only" meta grew a key when one was looked up; over a ``ChainMap`` the copy shared
the caller's parent maps, so what the caller wrote there later (a credential) appeared in a message already stored.
On 44ddfa8 each copy was ``dict()`` of the view: a plain dict of its own.
"""

from __future__ import annotations

from collections import ChainMap, defaultdict
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest

from contextfold.manager import ContextManager
from contextfold.messages import Message

SECRET = "hunter2-Qv8rX3mZ"


class _Settings(Mapping[str, Any]):
    """A caller's own mapping: read-only, no ``copy()``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_a_view_over_a_mapping_without_copy_gets_its_id() -> None:
    m = Message("user", "hello", meta=MappingProxyType(_Settings({"source": "crm"})))
    copy = m.with_meta(id="m1")
    assert dict(copy.meta) == {"source": "crm", "id": "m1"}
    assert type(copy.meta) is MappingProxyType


def test_a_copy_of_a_defaultdict_view_does_not_grow_when_read() -> None:
    m = Message("user", "hello", meta=MappingProxyType(defaultdict(list, {"source": "crm"})))
    copy = m.with_meta(id="m1")
    assert copy.meta.get("trail") is None
    with pytest.raises(KeyError):
        copy.meta["trail"]  # (a defaultdict would make the key and answer [])
    assert dict(copy.meta) == {"source": "crm", "id": "m1"}


def test_a_copy_of_a_chainmap_view_owns_its_keys() -> None:
    defaults: dict[str, Any] = {"tenant": "acme"}
    m = Message("user", "hello", meta=MappingProxyType(ChainMap({"source": "crm"}, defaults)))
    copy = m.with_meta(id="m1")
    defaults["note"] = f"password={SECRET}"
    assert dict(copy.meta) == {"tenant": "acme", "source": "crm", "id": "m1"}


def test_add_takes_messages_whose_meta_is_a_view_of_a_callers_mapping() -> None:
    defaults: dict[str, Any] = {"tenant": "acme"}
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="rt8-with-meta-views")
    cm.add([Message("system", "You help."),
            Message("user", "What failed?", meta=MappingProxyType(_Settings({"source": "crm"}))),
            Message("user", "And why?", meta=MappingProxyType(ChainMap({"source": "chat"}, defaults)))])
    defaults["note"] = f"password={SECRET}"
    assert [m.text for m in cm.prepare_messages()] == ["You help.", "What failed?", "And why?"]
    assert SECRET not in repr([dict(m.meta) for m in cm.messages()])
    cm.close()
