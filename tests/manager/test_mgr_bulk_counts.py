"""A bulk add of distinct messages encodes each text once (issue 22).

Write-time truncation counts a tool output exactly to decide whether it goes over the token cap, and the output,
kept whole, is then counted as a message. The counter remembers counts of long texts in a bounded memo: when the
message counts came after every write-time step of a bulk add, a bulk of distinct messages larger than that memo
found none of the outputs' counts there, and each output between the token cap and the byte cap was encoded twice
(100,000 distinct messages: ~30% of the tokenizer's time in ``add()``).
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.tokens import counting
from contextfold.tokens.counting import TiktokenCounter

NONCE = "bkc5w8"


def _encodes(monkeypatch: Any) -> dict[str, int]:
    """How many times each text was given to the encoder (wrapping the loaded encoding's ``encode_ordinary``)."""
    seen: dict[str, int] = {}
    encoding = TiktokenCounter("o200k_base").encoding
    encode = encoding.encode_ordinary

    def counted(text: str) -> list[int]:
        seen[text] = seen.get(text, 0) + 1
        return encode(text)

    monkeypatch.setattr(encoding, "encode_ordinary", counted)
    return seen


def test_each_output_of_a_bulk_add_is_encoded_once(monkeypatch: Any) -> None:
    monkeypatch.setattr(counting, "_LONG_COUNTS_MAX", 64)  # (a bulk many times what the memo holds, kept small)
    monkeypatch.setattr("contextfold.manager._intake._COUNT_AFTER_STORED", 16, raising=False)
    cm = ContextManager("gpt-4o", max_context_tokens=4_000, store="memory", archive="memory",
                        session_id=f"bulk-counts-{NONCE}")
    cm.tokens()  # (the encoder loaded)
    cap = cm.cache.config.message_tokens(cm.cache.context_window)
    # (over the cap in bytes, under it in tokens: " the" is one token of four bytes)
    outputs = [f"{NONCE} output {i}\n" + " the" * (cap // 2) for i in range(300)]
    history: list[Message] = [Message.user(f"task {NONCE}")]
    for i, text in enumerate(outputs):
        history.append(Message.assistant("", [ToolCall(f"c{i}", "run", "{}")]))
        history.append(Message.tool(f"c{i}", text, name="run"))
    seen = _encodes(monkeypatch)
    cm.add(history)
    stored = [m for m in cm.messages() if m.role == "tool"]
    assert len(stored) == 300 and all(m.text in outputs for m in stored)  # (kept whole: under the cap)
    assert all(len(text.encode()) > cap for text in outputs)  # (so each was counted to decide its cut)
    assert {text: seen.get(text) for text in outputs} == dict.fromkeys(outputs, 1)
    cm.close()


def test_a_full_memo_of_long_texts_keeps_its_newer_half(monkeypatch: Any) -> None:
    monkeypatch.setattr(counting, "_LONG_COUNTS_MAX", 8)
    counter = TiktokenCounter("o200k_base")
    texts = [f"{NONCE} {i} " + "long text " * 40 for i in range(9)]
    counts = [counter.count(t) for t in texts]  # (the ninth finds the memo full)
    seen = _encodes(monkeypatch)
    assert [counter.count(t) for t in texts[-4:]] == counts[-4:]
    assert not seen  # (the newest were kept when the memo was full)
    assert counter.count(texts[0]) == counts[0] and seen == {texts[0]: 1}  # (the oldest went)


@pytest.mark.parametrize("given", ["id-7", 7, None, ""])
def test_with_id_is_with_meta_of_an_id(given: object) -> None:
    source = Message.tool("c1", f"out {NONCE}", name="run", meta={"a": [1], "id": "old"}).with_meta(id="first")
    by_id = source.with_id(given)  # type: ignore[arg-type]
    by_meta = source.with_meta(id=given)
    assert by_id == by_meta and list(by_id.meta.items()) == list(by_meta.meta.items())
    assert by_id._origin is by_meta._origin
    assert (by_id._origin is source._origin) == isinstance(given, str)
