"""A lying ``str`` subclass, or an object claiming ``str``, neither leaks into the archive nor drops its event.

Left open by the seventeenth stop: the archive path (``redact_obj``, a message's redaction) read a subclass's own
methods. A ``str`` subclass whose ``__ne__``/``__eq__`` lie passed a message's meta (and its content, through the
redactor's cache of texts found clean) into the transcript in clear; one whose ``startswith`` said "redacted already"
passed the key rule under ``password``; an object whose ``__class__`` property claims ``str`` made the redactor raise
(``AttributeError``: the event, the summary, the transcript were lost). Values are read as their exact type now
(``contextfold._exact``), as telemetry already read them: redaction writes what the plain value would have written.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.messages import Message, TextPart, ToolCall
from contextfold.redact import Redactor
from contextfold.telemetry._session_redaction import redacted_event

NONCE = "s18sx7q2"
SECRET = f"ghp_{NONCE}a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
PASSWORD = f"pw-{NONCE}-plain-words"


class Liar(str):
    """Says it equals anything, contains nothing, and was redacted already."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __contains__(self, other: object) -> bool:
        return False

    def startswith(self, *args: Any) -> bool:  # type: ignore[override]
        return True


class ClaimsStr:
    """An object whose ``__class__`` says ``str``: ``isinstance`` believes it."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def __str__(self) -> str:
        return f"claimed {SECRET}"


def _written(archive: Archive, session: str) -> str:
    """Every file the archive wrote, decoded."""
    store = archive.store
    assert isinstance(store, MemoryArchiveStore)
    return "".join((store.read(sid, name) or b"").decode() for sid in store.sessions() for name in store.names(sid))


def test_a_lying_subclass_in_meta_and_content_is_redacted_in_the_transcript() -> None:
    archive = Archive(MemoryArchiveStore())
    messages = [Message.user(Liar(f"see {SECRET}"), meta={"note": Liar(f"v {SECRET}"), "password": Liar(PASSWORD),
                                                         "deep": {"x": [Liar(f"w {SECRET}")]}}),
                Message.assistant("ok")]
    archive.archive_transcript(f"s-{NONCE}", messages)
    written = _written(archive, f"s-{NONCE}")
    assert "see " in written  # (the transcript is there)
    assert SECRET not in written and PASSWORD not in written  # 08dd6b2: both in clear


def test_a_lying_part_text_or_call_arguments_are_redacted_in_the_transcript() -> None:
    archive = Archive(MemoryArchiveStore())
    messages = [Message("user", (TextPart(Liar(f"part {SECRET}")),)),
                Message("assistant", "calling", tool_calls=(ToolCall("c1", "read", Liar(f'{{"p": "a {SECRET}"}}')),)),
                Message.tool("c1", f"out {NONCE}")]
    archive.archive_transcript(f"s-{NONCE}-parts", messages)
    written = _written(archive, f"s-{NONCE}-parts")
    assert "part " in written and SECRET not in written  # 08dd6b2: both in clear (Message == said unchanged)


def test_the_bulk_and_single_message_paths_agree() -> None:
    messages = [Message.user(f"note {i} {NONCE}", meta={"t": Liar(f"v {SECRET}")} if i == 2 else {"n": i})
                for i in range(6)]
    bulk = Redactor().redact_messages(messages)
    assert bulk == [Redactor().redact_message(m) for m in messages]
    assert SECRET not in json.dumps([dict(m.meta) for m in bulk])


def test_an_object_claiming_str_is_redacted_not_raised() -> None:
    archive = Archive(MemoryArchiveStore())
    session = f"s-{NONCE}-c"
    archive.append_events(session, [{"name": f"e-{NONCE}", "value": ClaimsStr(), "password": ClaimsStr()}])
    archive.archive_summary(session, 1, {"text": f"sum {NONCE}", "by": ClaimsStr()})  # 08dd6b2: AttributeError
    written = _written(archive, session)
    assert f"e-{NONCE}" in written and f"sum {NONCE}" in written and SECRET not in written
    out = redacted_event(Redactor().redact_obj, {"name": f"n-{NONCE}", "span_id": "0123456789abcdef",
                                                 "value": ClaimsStr(), "nested": {"v": ClaimsStr()}})
    assert out["name"] == f"n-{NONCE}" and SECRET not in json.dumps(out, default=str)
    m = Message.user(f"hi {NONCE}", meta={"v": ClaimsStr()})
    assert type(m.meta["v"]) is str  # (held as its text, as any object a transcript writes as text)
    assert SECRET not in json.dumps(dict(Redactor().redact_message(m).meta))


def test_a_lying_key_rule_value_is_replaced_by_the_marker() -> None:
    out = Redactor().redact_obj({"password": Liar(PASSWORD), "token": Liar(f"x {SECRET}")})
    assert out["password"].startswith("[REDACTED") and type(out["password"]) is str  # 08dd6b2: the password
    assert SECRET not in json.dumps(out)


_LEAF_TEXTS = st.sampled_from(["plain", SECRET, f"key={SECRET}", PASSWORD, f"[REDACTED {SECRET}", ""])
_KEYS = st.sampled_from(["note", "password", "token", "api_key", "x"])
_PLAIN = st.recursive(_LEAF_TEXTS | st.integers(-5, 5),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
                      max_leaves=8)


def _lying(value: Any) -> Any:
    if type(value) is str:
        return Liar(value)
    if type(value) is list:
        return [_lying(v) for v in value]
    if type(value) is dict:
        return {Liar(k): _lying(v) for k, v in value.items()}
    return value


@settings(max_examples=60, deadline=None)
@given(_PLAIN)
def test_lying_subclasses_are_redacted_as_their_plain_values(plain: Any) -> None:
    """What redaction writes of a structure of lying strings is what it writes of the plain one."""
    expected = json.dumps(Redactor().redact_obj(plain))
    assert json.dumps(Redactor().redact_obj(_lying(plain))) == expected
    meta = plain if type(plain) is dict else {"v": plain}
    plain_message = Redactor().redact_message(Message.user(f"m {NONCE}", meta=meta))
    lying_message = Redactor().redact_message(Message.user(Liar(f"m {NONCE}"), meta=_lying(meta)))
    assert json.dumps(dict(lying_message.meta)) == json.dumps(dict(plain_message.meta))
