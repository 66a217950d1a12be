"""A copy of a message holding a secret keeps its own meta's key order when it takes its content's redaction.

Copies are equal but for ``meta["id"]`` and are told apart by the keys' values, not their order: one given with its
own id first and one given none (``add()`` appends an id last) are copies. The catch-up's bulk path (issue 22,
eighteenth session, lane K) made such a copy ``redacted.with_id(own)``, the original's key order, and the archived
transcript then differed from what redacting each copy on its own writes (review of lane K).
"""
import collections

from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.redact import Redactor

SECRET = "Hu2nt3er9Xy7Qz4Lm8Pw-k18order"


def _pair() -> tuple[Message, Message, Message]:
    text = f"export password={SECRET} done"
    original = Message("user", text, meta={"note": "n", "id": "orig-1"})
    copy = Message("user", text, meta={"id": "copy-2", "note": "n"})  # (same content, own id, its own key order)
    return original, copy, original.with_id("orig-3")  # (a third id: clean_ids needs two strings to search)


def test_a_copy_keeps_its_own_meta_order_through_learn_from() -> None:
    original, copy, third = _pair()
    r = Redactor()
    r.learn_from([original, copy, third])
    out = r.redact_messages([original, copy, third])
    assert SECRET not in out[1].text
    assert out[1].meta["id"] == "copy-2"
    assert list(out[1].meta) == list(copy.meta)
    assert list(r.redact_message(copy).meta) == list(copy.meta)


def test_the_same_copy_redacted_alone_keeps_its_order() -> None:
    # (the reference: no learn_from catch-up, each message redacted on its own)
    original, copy, _ = _pair()
    r = Redactor()
    r.redact_message(original)
    assert list(r.redact_message(copy).meta) == list(copy.meta)


def test_the_archived_transcript_keeps_each_copys_meta_order() -> None:
    # Through a manager: a message holding a secret, some given with their own id first ({"id", "note"}), the
    # others given no id ({"note"}: add() appends one, so "id" comes last). Equal but for their ids: copies.
    # On 790fc4a 30 of the 75 id-last copies are archived as {"id", "note"} (their content's redaction's order).
    text = f"export password={SECRET} done"
    hist: list[Message] = []
    for i in range(1500):
        hist.append(Message("user", f"filler {i} " + "lorem ipsum " * 30, meta={"note": "n"}))
        if i % 10 == 0:
            hist.append(Message("user", text, meta={"note": "n"} if i % 20 else {"id": f"u{i}", "note": "n"}))
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory",
                        session_id=f"k-order-{id(object())}")
    try:
        cm.add(hist)
        cm.prepare_messages()
        assert cm.archive is not None
        written = [m for _, ms in cm.archive.transcripts(cm.session_id) for m in ms]
        orders = collections.Counter((m.meta["id"].startswith("u"), tuple(m.meta))
                                     for m in written if "password=" in m.text)
        assert all(SECRET not in m.text for m in written)
        assert orders[(False, ("id", "note"))] == 0, orders  # each manager-id copy keeps ("note", "id")
    finally:
        cm.close()
