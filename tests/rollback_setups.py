"""Set-ups the ``add()`` rollback tests share: a provider's compaction item, and an interrupt once it is archived;
a store failing in the middle of a batch (an add failing before its commit)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from contextfold import ContextManager
from contextfold.errors import StoreError
from contextfold.messages import Message, ToolCall, UnknownPart
from contextfold.stores.memory import MemoryBlobStore


def provider_compaction_item(text: str) -> Message:
    """An Anthropic compaction item: ``add()`` archives the view before it and drops that view."""
    return Message("assistant", (UnknownPart({"type": "compaction", "content": text}, format="anthropic"),))


def interrupt_once_archived(cm: ContextManager, monkeypatch: pytest.MonkeyPatch, item_id: str) -> None:
    """The view's count interrupted (KeyboardInterrupt) once the item stored as ``item_id`` is in the view.

    By then the item's ``add()`` archived what came before it, sent what it pruned and marked the view archived:
    everything its rollback must take back or void. ``monkeypatch.undo()`` ends it.
    """
    counted = cm._view.totals

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        if any(m.meta.get("id") == item_id for m in cm._view.raw):
            raise KeyboardInterrupt
        return counted(*args, **kwargs)

    monkeypatch.setattr(cm._view, "totals", interrupted)


def item_add_rolled_back(cm: ContextManager, monkeypatch: pytest.MonkeyPatch, nonce: str) -> list[Any]:
    """``cm`` given four messages (m:1 to m:4), then an item and a user message whose add() is interrupted.

    The interrupt lands once the item (m:5) archived the four (see :func:`interrupt_once_archived`). Returns that
    batch, for the caller's retry.
    """
    cm.add([{"role": "system", "content": f"system {nonce}"}, {"role": "user", "content": f"task {nonce}"},
            {"role": "assistant", "content": f"working {nonce}"}, {"role": "user", "content": f"go on {nonce}"}])
    batch = [provider_compaction_item(f"summary {nonce}"), {"role": "user", "content": f"after {nonce}"}]
    interrupt_once_archived(cm, monkeypatch, "m:5")
    with pytest.raises(KeyboardInterrupt):
        cm.add(batch)
    monkeypatch.undo()
    return batch


class StoreFailingOnOutput(MemoryBlobStore):
    """Memory whose write of the ``fail_on``-th whole output holding ``nonce`` fails, once (a store gone mid-batch)."""

    def __init__(self, nonce: str) -> None:
        super().__init__()
        self.nonce = nonce.encode()
        self.fail_on = 0  # (0: never; the count starts when it is set)
        self.outputs = 0

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        if self.fail_on and any(self.nonce in data for _, data in items):
            self.outputs += 1
            if self.outputs == self.fail_on:
                self.fail_on = self.outputs = 0
                raise StoreError("the store went away")
        super().put_many(items)


def two_large_outputs(nonce: str) -> list[Message]:
    """A turn calling two tools, and their outputs: each cut at write time and over an 8,192-byte input limit."""
    calls = [ToolCall(id=f"t{n}", name="read", arguments=f'{{"path": "{n}.py"}}') for n in range(2)]
    return [Message.assistant(f"turn {nonce}", calls),
            *(Message.tool(f"t{n}", f"line {n} {nonce} of the file\n" * 900, name="read") for n in range(2))]
