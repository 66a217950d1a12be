"""A receipt counts the messages a summary replaced by their kind as ``Message.kind`` reads it (issue 22: read from
meta directly, the roles counted in C, for a summarized part that is most of a 100,000-message view)."""

from __future__ import annotations

from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.steering import RECEIPT_KIND


def test_a_receipt_counts_every_message_but_contextfolds_own_whatever_their_kind_holds() -> None:
    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    try:
        summarized = [
            Message("user", "asked", meta={"kind": {"not": "hashable"}}),  # (not a str: no kind, counted)
            Message("assistant", "did", meta={"kind": ["a", "list"]}),
            Message("assistant", "planned", meta={"kind": 7}),
            Message("user", "old summary", meta={"kind": "summary"}),
            Message("user", "facts", meta={"kind": "retain"}),
            Message("user", "note", meta={"kind": RECEIPT_KIND}),
            Message("assistant", "plain"),
        ]
        receipt = cm.steering.receipt(summarized)
        assert receipt is not None and "4 earlier messages (3 of your turns)" in receipt.text
        assert cm.steering.turns_summarized == 3
    finally:
        cm.close()
