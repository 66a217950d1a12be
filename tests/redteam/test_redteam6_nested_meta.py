"""A message owns its nested ``meta``/``extra``: a caller's later change to a dict it passed changes no message.

issue 21 §1, the known hole "a nested meta/extra mutated after redaction keeps the old redaction": a Message froze
``meta`` and ``extra`` one level deep, so a nested dict stayed the caller's. A message found clean was remembered
as clean (by identity); the caller then wrote a credential into the nested dict it still held, and the redactor
handed the message back as clean: the credential reached the archive's transcript in clear.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall, freeze
from contextfold.redact import Redactor

SECRET = "hunter2-Kx9vQ7mZ"


def test_a_clean_message_stays_clean_when_the_callers_nested_dict_changes() -> None:
    note = {"note": "nothing here"}
    trail = [{"step": "read"}]
    m = Message("user", "hi", meta={"ctx": note, "trail": trail}, extra={"ctx": note})
    redactor = Redactor()
    assert redactor.redact_message(m) is m
    note["note"] = f"password: {SECRET}"
    trail.append({"step": f"password={SECRET}"})
    out = redactor.redact_message(m)
    assert SECRET not in repr(out.meta) and SECRET not in repr(out.extra)
    assert out.meta["ctx"] == {"note": "nothing here"} and out.meta["trail"] == [{"step": "read"}]


def test_a_redacted_message_is_not_changed_by_the_caller_either() -> None:
    ctx = {"note": f"password: {SECRET}"}
    m = Message("assistant", "ok", tool_calls=(ToolCall("c1", "f", "{}"),), meta={"ctx": ctx})
    out = Redactor().redact_message(m)
    assert SECRET not in repr(out.meta)
    ctx["note"] = "changed"
    assert m.meta["ctx"] == {"note": f"password: {SECRET}"}  # the message as it was made


def test_the_archive_never_gets_what_the_caller_wrote_into_a_nested_dict_later() -> None:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="rt6-nested-meta")
    ctx = {"source": "chat"}
    cm.add([Message("user", "What failed?", meta={"ctx": ctx}), Message("assistant", "The build.")])
    cm.prepare()
    ctx["source"] = f"password: {SECRET}"
    cm.compact(force=True)
    cm.close()
    dumped = json.dumps([dict(m.meta) for m in cm.messages()], default=str)
    assert SECRET not in dumped
    assert cm.archive is not None
    archived = [m for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
    assert "What failed?" in [m.text for m in archived]
    assert SECRET not in json.dumps([dict(m.meta) for m in archived], default=str)


nested = st.recursive(st.text(max_size=5) | st.integers(),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                    max_size=3),
                      max_leaves=8)


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=4), nested, max_size=4))
def test_a_message_keeps_equal_values_and_shares_no_container(meta: dict[str, object]) -> None:
    made = Message("user", "hi", meta=meta, extra=meta)
    with_meta = Message("user", "hi").with_meta(**meta)
    assert dict(made.meta) == meta and dict(made.extra) == meta

    def containers(value: object) -> list[int]:
        if isinstance(value, dict):
            return [id(value), *(i for v in value.values() for i in containers(v))]
        if isinstance(value, list):
            return [id(value), *(i for v in value for i in containers(v))]
        return []

    for frozen in (made.meta, made.extra, with_meta.meta):
        assert not set(containers(meta)) & set(containers(dict(frozen)))
    # (contextfold's own copies share the message's nested values: what tells a repeated history's copies)
    assert not made.meta or freeze(made.meta) is made.meta
    assert made.with_meta(id="x").meta.get("a") is made.meta.get("a")
