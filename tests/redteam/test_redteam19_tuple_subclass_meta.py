"""A tuple subclass (a namedtuple) nested in a message's meta is the message's own when it holds a list or mapping.

Found by the fifteenth session's red team (lane E), confirmed by the nineteenth: red team 17 made a mapping, list or
set of any type nested in a meta the message's own copy, but a tuple subclass was shared as it was (copying it would
change its type). A list inside a namedtuple was then the caller's: a credential appended to it after ``add()``
reached the archive in clear, the message having been found clean. Such a tuple is copied (a namedtuple keeps its
type; another subclass becomes a plain tuple, as another mapping type becomes a dict).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, NamedTuple

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor

NONCE = "rt19-tuple-8d4a"
SECRET = "hunter2-Qm7Vz3Lw"

Ctx = namedtuple("Ctx", "name trail")


class Typed(NamedTuple):
    name: str
    trail: list[str]


class Pair(tuple[Any, ...]):
    """A caller's own tuple type (its constructor is tuple's)."""


def test_the_archive_never_gets_what_the_caller_appended_to_a_list_in_a_namedtuple() -> None:
    # Fails on f63f2d6: the archive held 'password=hunter2-Qm7Vz3Lw', appended after add() to the namedtuple's list.
    trail: list[str] = ["read"]
    cm = ContextManager(model="gpt-4o", archive="memory", session_id=NONCE, redact=Redactor(apply_to_model=True))
    call = ToolCall("c1", "bash", "{}", extra={"ctx": Ctx("a", trail)})
    cm.add([Message.user(f"What failed? {NONCE}", meta={"ctx": Ctx("a", trail), "deep": (Ctx("b", trail),)}),
            Message.assistant("", [call]), Message.tool("c1", "ok")])
    cm.prepare()
    trail.append(f"password={SECRET}")
    cm.add(Message.user("next"))
    cm.prepare()
    cm.compact(force=True)
    cm.close()
    assert cm.archive is not None
    archived = [m for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
    assert NONCE in repr(archived)
    assert SECRET not in repr(archived)


def test_a_tuple_subclass_is_copied_with_its_type_when_it_holds_a_container() -> None:
    trail: list[str] = ["read"]
    atoms = Ctx("a", "b")
    m = Message.user(NONCE, meta={"ctx": Ctx("a", trail), "typed": Typed("t", trail), "pair": Pair(("p", trail)),
                                  "atoms": atoms})
    trail.append(SECRET)
    assert type(m.meta["ctx"]) is Ctx and m.meta["ctx"] == ("a", ["read"])
    assert type(m.meta["typed"]) is Typed and m.meta["typed"].trail == ["read"]
    assert type(m.meta["pair"]) is tuple and m.meta["pair"] == ("p", ["read"])
    assert m.meta["atoms"] is atoms  # (nothing in it can change: shared, as before)
