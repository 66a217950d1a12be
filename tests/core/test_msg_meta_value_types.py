"""A ``UUID`` or ``Decimal`` in a message's meta comes back as itself; what is written of it is its text.

Since the fifteenth session's lane X1 (``messages.value_text``) a meta value JSON has no form for was held as its
text from construction on: a ``UUID`` an application stamps its messages with came back from ``Message.meta``,
``messages()`` and ``stored_messages()`` as a ``str`` (as a ``UUID`` before). They are immutable value types, kept
as they are like times (exact types: a subclass is still held as its text); transcripts, archives and stored
sessions write their text, and a message read back from one holds that text, redacted as any string of the meta.
"""

from __future__ import annotations

import datetime
import itertools
import pickle
import uuid
from decimal import Decimal

from contextfold import ContextManager
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.serialize import json_text, message_from_dict, message_to_dict

NONCE = "r16metatypes"
RUN = uuid.UUID("5f0c1e2a-9b7d-4c3e-8a61-0d2f4b6c8e10")
PRICE = Decimal("12.50")
_T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


class _MyUUID(uuid.UUID):
    """A subclass: its text may read what its owner changes, so it is held as its text."""


def test_a_message_keeps_a_uuid_and_a_decimal_as_themselves() -> None:
    m = Message.user(f"hi {NONCE}", meta={"run": RUN, "price": PRICE, "both": (RUN, PRICE), "tags": {RUN}})
    assert m.meta["run"] is RUN and m.meta["price"] is PRICE
    assert m.meta["both"] == (RUN, PRICE) and m.meta["tags"] == {RUN}
    assert pickle.loads(pickle.dumps(m)).meta["run"] == RUN
    sub = _MyUUID(str(RUN))
    assert Message.user("x", meta={"run": sub}).meta["run"] == str(RUN)  # (exact types only)


def test_what_the_manager_hands_back_and_what_it_writes() -> None:
    ticks = itertools.count()
    cm = ContextManager(model="gpt-4o", max_context_tokens=4_000, store="memory", archive="memory",
                        session_id=NONCE, clock=lambda: _T0 + datetime.timedelta(seconds=next(ticks)))
    cm.add([Message.user(f"What failed? {NONCE}", meta={"run": RUN, "price": PRICE}), Message.assistant("The build.")])
    for view in (cm.messages(), cm.prepare_messages(), cm.stored_messages()):
        first = next(m for m in view if NONCE in m.text)
        assert first.meta["run"] is RUN and first.meta["price"] is PRICE
    # Written as text: the JSON form, and the archive's transcript once a compaction replaced the message.
    written = message_to_dict(next(m for m in cm.messages() if NONCE in m.text))
    assert written["meta"]["run"] == str(RUN) and written["meta"]["price"] == "12.50"
    assert message_from_dict(written).meta["run"] == str(RUN)
    assert str(RUN) in json_text(written)
    for i in range(6):
        cm.add([Message.user(f"question {i} " + "word " * 300), Message.assistant("answer " * 50)])
    cm.compact(force=True)
    assert cm.archive is not None
    archived = [m for _, messages in cm.archive.transcripts(NONCE) for m in messages if NONCE in m.text]
    assert archived and archived[0].meta["run"] == str(RUN) and archived[0].meta["price"] == "12.50"
    cm.close()


def test_a_uuid_whose_text_is_a_secret_is_redacted_where_it_is_written() -> None:
    secret_run = uuid.UUID("0badc0de-1234-4abc-8def-00000000f00d")
    redactor = Redactor(patterns={"run_ids": r"0badc0de-[0-9a-f-]{27}"})
    messages = [Message.user(f"note {i} {NONCE}", meta={"run": secret_run if i == 3 else RUN}) for i in range(8)]
    alone = [redactor.redact_message(m) for m in messages]
    bulk = Redactor(patterns={"run_ids": r"0badc0de-[0-9a-f-]{27}"}).redact_messages(messages)
    assert bulk == alone
    assert str(secret_run) not in repr([dict(m.meta) for m in bulk])
    assert bulk[0].meta["run"] is RUN  # (a value holding no secret is kept as it is)


def test_the_bulk_prefilter_reads_a_uuids_text_instead_of_redacting_its_message_alone() -> None:
    """Held as its text, a UUID was listed by the prefilter; held as itself, its message is not sent to be redacted
    alone for it (3,000 messages stamped with one: ~150 ms against ~30 as text; ~50 listed)."""
    messages = [Message.user(f"note {i} {NONCE}", meta={"run": uuid.uuid4(), "price": Decimal(i)}) for i in range(20)]
    found = Redactor()._message_redactor._suspects(messages)
    assert found is not None and not found[0]
