"""The read-ahead builds each tool output's digest as its masking will (issue 22: counting the digest's items and
checking them for secrets was a quarter of a masking turn): the masking turn then encodes nothing and scans nothing
to list the same items."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from contextfold.cache import ToolOutputCache
from contextfold.cache._digest import digest_material, output_digest
from contextfold.manager._compactor import warm_for_compaction
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import TiktokenCounter, counting


def _outputs(nonce: str) -> list[Message]:
    out: list[Message] = []
    for i in range(6):
        body = "\n".join(f"/srv/{nonce}/pkg_{i}/module_{n}.py:{n * 17}: KeyError in load_{nonce}_{n}() took {n} ms"
                         for n in range(25))
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"ls pkg_{i}"})),)))
        out.append(Message("tool", body, tool_call_id=f"c{i}", name="bash"))
    return out


def test_the_masking_turn_finds_every_digest_item_counted_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")  # names no other test counted (counts are remembered by text)
    history = _outputs(nonce)
    redactor, counter = Redactor(), TiktokenCounter()
    warm_for_compaction(history, False, redactor, False, ToolOutputCache(MemoryBlobStore()), 40, counter)

    encoded: list[str] = []
    scanned: list[str] = []
    encoding = counting._ENCODINGS.get(counter.encoding_name) or counting._load_encoding(counter.encoding_name)

    class Watched:
        def encode_ordinary(self, text: str) -> Any:
            encoded.append(text)
            return encoding.encode_ordinary(text)

    monkeypatch.setitem(counting._ENCODINGS, counter.encoding_name, Watched())
    spans = Redactor.spans

    def watched_spans(self: Redactor, text: str) -> Any:
        scanned.append(text)
        return spans(self, text)

    monkeypatch.setattr(Redactor, "spans", watched_spans)
    digests = []
    for m in history[1::2]:  # as cache/masking._mask_one builds a placeholder's digest
        material = digest_material(redactor.blank(m.text))
        known = next(c.arguments for a in history for c in a.tool_calls if c.id == m.tool_call_id)
        digests.append(output_digest("", budget_tokens=40, counter=counter, known=known, material=material.items,
                                     allow=lambda item: not redactor.mentions_secret(item)))
    assert all(f"/srv/{nonce}/pkg_{i}/module_0.py" in d for i, d in enumerate(digests))
    assert encoded == []
    # (blank() looks at the whole output again, as the masking does: the digest's items are not scanned one by one)
    assert scanned == [m.text for m in history[1::2]]
