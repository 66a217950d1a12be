"""A mapping or list of any type nested in a message's meta is the message's own: the caller's later change is not.

Found by the seventeenth red team (pre-existing; ``test_redteam7_proxy_meta.py`` owned a caller's read-only view
given as the meta itself, and plain dicts and lists nested in it): a nested value of another type (a caller's
``MappingProxyType``, an ``OrderedDict``, a ``defaultdict``, a list subclass) was shared with the caller. Redaction's
verdict is kept by message, so a credential written into it after ``add()`` reached the archive in clear. Such a
value is copied as a plain dict (or list, or set).
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor

NONCE = "rt17-nested-71b3"
SECRET = "hunter2-Jd6Rt2Xs"


class Trail(list[str]):
    """A caller's own list type."""


def _proxy() -> tuple[Any, Callable[[], None]]:
    ctx: dict[str, str] = {"trail": "read"}
    return MappingProxyType(ctx), lambda: ctx.update(more=f"password={SECRET}")


def _ordered() -> tuple[Any, Callable[[], None]]:
    ctx: OrderedDict[str, str] = OrderedDict(trail="read")
    return ctx, lambda: ctx.update(more=f"password={SECRET}")


def _default() -> tuple[Any, Callable[[], None]]:
    ctx: defaultdict[str, str] = defaultdict(str, trail="read")
    return ctx, lambda: ctx.update(more=f"password={SECRET}")


def _list_subclass() -> tuple[Any, Callable[[], None]]:
    trail = Trail(["read"])
    return {"trail": trail}, lambda: trail.append(f"password={SECRET}")


def _in_a_tuple() -> tuple[Any, Callable[[], None]]:
    ctx: dict[str, str] = {"trail": "read"}
    return ("x", MappingProxyType(ctx)), lambda: ctx.update(more=f"password={SECRET}")


CASES = {"proxy": _proxy, "ordered": _ordered, "defaultdict": _default, "list subclass": _list_subclass,
         "in a tuple": _in_a_tuple}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_archive_never_gets_what_the_caller_wrote_into_a_nested_meta_value(case: str) -> None:
    value, change = CASES[case]()
    cm = ContextManager(model="gpt-4o", archive="memory", session_id=f"{NONCE}-{case}",
                        redact=Redactor(apply_to_model=True))
    call = ToolCall("c1", "bash", "{}", extra={"ctx": value})
    cm.add([Message.user(f"What failed? {NONCE}", meta={"ctx": value}), Message.assistant("", [call]),
            Message.tool("c1", "ok")])
    cm.prepare()
    change()
    cm.add(Message.user("next"))
    cm.prepare()
    cm.compact(force=True)
    cm.close()
    assert cm.archive is not None
    archived = [m for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
    assert NONCE in repr(archived)
    assert SECRET not in repr(archived)


def test_a_nested_value_is_copied_with_its_content() -> None:
    value, change = _ordered()
    m = Message.user("hi", meta={"ctx": value, "deep": [value]})
    change()
    assert dict(m.meta["ctx"]) == {"trail": "read"}
    assert dict(m.meta["deep"][0]) == {"trail": "read"}
