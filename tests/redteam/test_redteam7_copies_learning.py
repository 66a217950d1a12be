"""Secret learning of a repeated history: copies known by their origin must redact as if read one by one.

Seventh session, issue 22 (34b3a51, 7dfd10f, 104691b): a copy given only an id remembers what it is a copy of
(``Message._origin``); ``Redactor.learn_from`` groups copies by origin and takes a clean copy's fast path, and the
ledger answers equality by identity for such copies. The property: whatever mix of copies (a secret only in one
copy's id, a copy later given other content by ``with_content``, a copy of a copy), ``learn_from`` on the whole
history then ``redact_message`` on each gives exactly what a redactor that read every message one at a time gives,
and no message keeps a secret bare.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.serialize import dumps_messages

SECRETS = ("AKIAIOSFODNN7EXAMPLE", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "hunter2-Kx9vQ7mZ")
ORIGINS = (
    Message("user", "look at the logs"),
    Message("tool", "line of output\n" * 10, tool_call_id="c1", name="read"),
    Message("assistant", "", tool_calls=(ToolCall("c2", "login", '{"user": "bob"}'),)),
    Message("tool", f"token={SECRETS[1]}", tool_call_id="c2", name="login"),
    Message("user", f"my password: {SECRETS[2]}").with_meta(id="seed"),
)


def _bare(messages: list[Message]) -> list[str]:
    text = json.dumps([[m.role, m.text, m.name, dict(m.meta), [c.arguments for c in m.tool_calls]]
                       for m in messages], default=str)
    return [s for s in SECRETS if s in text]


@st.composite
def repeated(draw: Any) -> list[Message]:
    out: list[Message] = []
    made: list[Message] = []
    for n in range(draw(st.integers(2, 14))):
        source = draw(st.sampled_from([*ORIGINS, *made])) if made else draw(st.sampled_from(ORIGINS))
        how = draw(st.sampled_from(["id", "id", "secret-id", "content", "same"]))
        if how == "id":
            m = source.with_meta(id=f"m{n}")
        elif how == "secret-id":
            m = source.with_meta(id=f"{SECRETS[0]}-{n}")
        elif how == "content":  # a copy given other content: no longer a copy of its origin
            m = source.with_content(f"{source.text} password={SECRETS[2]}")
        else:
            m = source
        made.append(m)
        out.append(m)
    return out


@settings(max_examples=30, deadline=None)
@given(repeated())
def test_learning_a_repeated_history_redacts_each_copy_as_reading_them_one_by_one(history: list[Message]) -> None:
    bulk = Redactor()
    bulk.learn_from(history)
    reference = Redactor()
    for _ in range(2):  # (twice: what a later message teaches is known for the earlier ones)
        for m in history:
            reference.redact_message(m)
    got = [bulk.redact_message(m) for m in history]
    want = [reference.redact_message(m) for m in history]
    assert got == want
    assert [dict(m.meta) for m in got] == [dict(m.meta) for m in want]
    assert not _bare(got)
    assert not [s for s in SECRETS if s in dumps_messages(got)]
    # and once more after learning the same history again (the copies then found in the ledger)
    bulk.learn_from(history)
    assert [bulk.redact_message(m) for m in history] == want


LATE = "Zr8QpL2xW7vN4kTy"  # no pattern finds it: it is a secret only once a later message says so


def test_a_secret_taught_after_its_copies_is_redacted_in_every_copy_in_the_archive() -> None:
    from contextfold.manager import ContextManager

    output = f"connected to db as admin with {LATE}\n" + "row\n" * 30
    first = Message("tool", output, tool_call_id="c0", name="db")
    history: list[Message] = []
    for rep in range(4):
        result = (first.with_meta(id=f"t{rep}") if rep == 0 else  # a copy known by its origin
                  Message("tool", output, tool_call_id=f"c{rep}", name="db").with_meta(id=f"t{rep}"))
        history += [Message("user", "again").with_meta(id=f"u{rep}"),
                    Message("assistant", "", tool_calls=(ToolCall(f"c{rep}", "db", "{}"),)), result]
    history += [Message("user", f"the db password={LATE}"), Message("assistant", "noted"),
                Message("user", "continue")]
    for batch in (True, False):
        cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=f"rt7-late-{batch}")
        if batch:
            cm.add(history)
        else:
            for m in history:
                cm.add(m)
        cm.prepare()
        cm.compact(force=True)
        cm.close()
        assert cm.archive is not None
        archived = [m for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
        assert sum("connected to db" in m.text for m in archived) == 4
        assert LATE[:8] not in json.dumps([[m.text, dict(m.meta)] for m in archived])
