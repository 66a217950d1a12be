"""Containers and parts whose own ``__eq__`` lies, in a message: redaction never asks them whether it changed anything.

Review of lane S (eighteenth stop): a tuple or frozenset subclass, or a part subclass, answered `out == m` (and the
ledger's `_same_but_id`) itself; one that lied kept the original message, secret included, all the way to the archive.
"""
from __future__ import annotations

import json

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.messages import Message, TextPart, ToolCall
from contextfold.redact import Redactor

NONCE = "f2lc7w3k"
SECRET = f"ghp_{NONCE}a1B2c3D4e5F6g7H8i9J0k1L2m3N4"


class LyingTuple(tuple):
    __hash__ = tuple.__hash__

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False


class LyingFrozenset(frozenset):
    __hash__ = frozenset.__hash__

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False


def _written(archive: Archive) -> str:
    store = archive.store
    return "".join((store.read(sid, name) or b"").decode() for sid in store.sessions() for name in store.names(sid))


def test_lying_tuple_subclass_in_meta_redact_message() -> None:
    m = Message.user(f"hi {NONCE}", meta={"tags": LyingTuple((f"k {SECRET}",))})
    out = Redactor().redact_message(m)
    assert SECRET not in json.dumps(dict(out.meta), default=str)


def test_lying_frozenset_subclass_in_meta_redact_message() -> None:
    m = Message.user(f"hi {NONCE}", meta={"tags": LyingFrozenset({f"k {SECRET}"})})
    out = Redactor().redact_message(m)
    assert SECRET not in json.dumps(dict(out.meta), default=list)


def test_lying_tuple_subclass_in_part_extra_redact_message() -> None:
    m = Message("user", (TextPart(f"hi {NONCE}", extra={"tags": LyingTuple((f"k {SECRET}",))}),))
    out = Redactor().redact_message(m)
    assert SECRET not in repr(out)


def test_lying_tuple_subclass_in_call_extra_redact_message() -> None:
    m = Message("assistant", "c", tool_calls=(ToolCall("c1", "f", "{}", extra={"t": LyingTuple((SECRET,))}),))
    out = Redactor().redact_message(m)
    assert SECRET not in repr(out)


def test_lying_tuple_subclass_in_meta_transcript() -> None:
    archive = Archive(MemoryArchiveStore())
    archive.archive_transcript(f"s-{NONCE}", [Message.user(f"hi {NONCE}", meta={"tags": LyingTuple((f"k {SECRET}",))}),
                                              Message.assistant("ok")])
    written = _written(archive)
    assert f"hi {NONCE}" in written
    assert SECRET not in written


def test_control_plain_tuple_is_redacted() -> None:
    """Control: the same secret in a plain tuple is redacted (so the failures above are the subclass's lie)."""
    m = Message.user(f"hi {NONCE}", meta={"tags": (f"k {SECRET}",)})
    assert SECRET not in json.dumps(dict(Redactor().redact_message(m).meta))
    m = Message("user", (TextPart(f"hi {NONCE}", extra={"tags": (f"k {SECRET}",)}),))
    assert SECRET not in repr(Redactor().redact_message(m))


def test_lying_tuple_subclass_in_meta_through_the_manager_archive() -> None:
    from contextfold import ContextManager

    cm = ContextManager(model="gpt-4o", max_context_tokens=30000, store="memory", archive="memory",
                        session_id=f"s-{NONCE}-cm", summarizer="extractive")
    cm.add([Message.user(f"hi {NONCE}", meta={"tags": LyingTuple((f"k {SECRET}",))}), Message.assistant("ok")])
    cm.archive_view()
    written = _written(cm.archive)
    assert f"hi {NONCE}" in written
    assert SECRET not in written


def test_lying_textpart_subclass_redact_message() -> None:
    """A part subclass whose __eq__ lies: redact_message's ``out == m`` keeps the original message."""
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True, eq=False)
    class LyingText(TextPart):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    m = Message("user", (LyingText(f"part {SECRET}"),))
    assert SECRET not in repr(Redactor().redact_message(m))



def test_namedtuple_in_meta_is_kept_as_itself_but_a_lying_one_is_a_tuple() -> None:
    """A plain namedtuple comes back as itself; one redefining ``__eq__`` is held as a plain tuple, and redacted."""
    from collections import namedtuple

    Pair = namedtuple("Pair", "key value")

    class LyingPair(Pair):  # type: ignore[misc, valid-type]
        __slots__ = ()
        __hash__ = tuple.__hash__

        def __eq__(self, other: object) -> bool:
            return True

    m = Message.user(f"hi {NONCE}", meta={"pair": Pair("k", f"v {NONCE}"), "lying": LyingPair("k", SECRET)})
    assert type(m.meta["pair"]) is Pair and m.meta["pair"].value == f"v {NONCE}"
    assert type(m.meta["lying"]) is tuple
    out = Redactor().redact_message(m)
    assert SECRET not in json.dumps(dict(out.meta))


def test_a_lying_part_never_shares_a_clean_messages_entry() -> None:
    """The ledger's 'same but the id' never asks a caller's part: a lying copy of a clean message is redacted itself."""
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True, eq=False)
    class LyingText(TextPart):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    r = Redactor()
    clean = Message("user", (TextPart(f"part {NONCE}"),), meta={"id": "a"})
    assert r.redact_message(clean) is clean
    lying = Message("user", (LyingText(f"part {NONCE} {SECRET}"),), meta={"id": "b"})
    assert SECRET not in repr(r.redact_message(lying))
