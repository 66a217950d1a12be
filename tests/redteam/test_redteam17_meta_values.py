"""A value in a message's meta that JSON has no form for neither stops the session nor carries a secret out.

Found by the seventeenth red team (pre-existing): ``add()`` takes any value in ``meta`` (a ``datetime`` an
application stamps its messages with, a ``UUID``, a ``set`` of tags), and the archive's transcript could not write it:
from the first compaction on, every ``prepare()`` raised ``TypeError: Object of type datetime is not JSON
serializable`` (the compaction writes the transcript of what it replaces), and so did ``compact()`` and ``close()``:
the agent could not go on. Such a value is written as its text (a set as a list), and what that text holds is
redacted as any string of the meta is: redaction left sets and other objects as they were, so a ``password=...``
tag in a set would have reached the archive in clear once written.
"""

from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal
from typing import Any

import pytest

from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.redact import Redactor

NONCE = "rt17-meta-3a9c"
SECRET = "hunter2-Wq7Zk4Mb"


class Ticket:
    """An application's own object, whose text holds a credential."""

    def __str__(self) -> str:
        return f"ticket password={SECRET}"


VALUES: dict[str, Any] = {
    "datetime": datetime.datetime(2026, 11, 27, 10, 0, tzinfo=datetime.UTC),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "decimal": Decimal("1.50"),
    "set": {f"password={SECRET}", "urgent"},
    "frozenset": frozenset({"build"}),
    "object": Ticket(),
    "nested": {"when": [datetime.date(2026, 1, 2)], "tags": {f"password={SECRET}"}},
}


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_a_meta_value_json_cannot_write_neither_stops_compaction_nor_leaks(kind: str) -> None:
    cm = ContextManager(model="gpt-4o", archive="memory", session_id=f"{NONCE}-{kind}", max_context_tokens=4_000,
                        redact=Redactor())
    cm.add([Message.user(f"What failed? {NONCE}", meta={"value": VALUES[kind]}), Message.assistant("The build.")])
    for i in range(12):
        cm.add([Message.user(f"question {i} " + "word " * 300), Message.assistant("answer " * 50)])
        cm.prepare()
    assert cm.compactions >= 1
    cm.compact(force=True)
    cm.close()
    assert cm.archive is not None
    archived = [m for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
    first = [m for m in archived if NONCE in m.text]
    assert first
    written = json.dumps([dict(m.meta) for m in first], default=repr)
    assert SECRET not in written


@pytest.mark.parametrize("kind", ["set", "object", "nested"])
def test_bulk_redaction_reads_a_set_or_an_object_of_the_meta_as_one_message_alone_does(kind: str) -> None:
    messages = [Message.user(f"note {i} {NONCE}", meta={"value": VALUES[kind]} if i == 3 else {"n": i})
                for i in range(8)]
    alone = [Redactor().redact_message(m) for m in messages]
    bulk = Redactor().redact_messages(messages)
    assert bulk == alone
    assert SECRET not in repr([dict(m.meta) for m in bulk])
