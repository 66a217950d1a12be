"""A suspect's text is read by the automaton once: its scan takes the bulk prefilter's read (issue 22).

The bulk prefilter (``Scanner.suspect_texts``) reads each message's strings joined (the triggers they hold, where the
patterns' heads start); the suspects are then redacted, and each of their long strings was read again by its scan.
The prefilter's read of the joined text is split into each string's own (``_scanner.split_read``) and handed to the
scans (``Scanner.reading``). A split read must be exactly the read of the string alone, and the redaction the same.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.redact._ledger import SEPARATOR
from contextfold.redact._triggers import TriggerFinder

NONCE = "pr3R3adS"  # (unique to this file: no cache of another test answers for it)
_SCANNER = Redactor()._scanner
_WORDS = sorted({*_SCANNER.triggers.triggers, *_SCANNER.triggers.heads} - {""})


def _fragment() -> st.SearchStrategy[str]:
    filler = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 =:_-/.\"'\n"), max_size=40)
    return st.one_of(st.sampled_from(_WORDS), filler, st.sampled_from([w.upper() for w in _WORDS]))


@settings(max_examples=80, deadline=None)
@given(parts=st.lists(st.lists(_fragment(), max_size=60).map("".join), min_size=1, max_size=5))
def test_a_split_read_is_the_read_of_each_part_alone(parts: list[str]) -> None:
    from contextfold.redact._scanner import split_read

    assert _SCANNER.splits_reads
    lowered = SEPARATOR.join(parts).lower()
    read = _SCANNER.triggers.read(lowered)
    if read is None or not lowered.isascii():
        return
    split = split_read(lowered, read, parts)
    for part in parts:
        if len(part) < 256:
            assert id(part) not in split or split[id(part)][0] is not part
            continue
        own = _SCANNER.triggers.read(part.lower())
        assert own is not None
        kept_part, (present, starts) = split[id(part)]
        assert kept_part is part
        assert present == own[0]
        assert starts == own[1]


def _batch() -> list[Message]:
    out: list[Message] = []
    for i in range(12):
        body = "\n".join(f"line {j} of {NONCE} output {i}: nothing here" for j in range(12))
        secret = f"\nexport DB_PASSWORD=Zq{i:03d}{NONCE}x9\napi_key = 'k{i}{NONCE}'\n" if i % 3 == 0 else ""
        out.append(Message("assistant", "", tool_calls=(ToolCall(f"c{i}", "bash", '{"cmd": "cat log"}'),)))
        out.append(Message.tool(f"c{i}", body + secret + f"token {i}", name="bash"))
    return out


def test_a_suspects_text_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 08dd6b2: each long suspect output was read by the prefilter, then again by its scan.
    batch = _batch()
    read: list[str] = []
    real = TriggerFinder.read

    def counting(self: TriggerFinder, lowered: str) -> tuple[set[str], dict[str, list[int]]] | None:
        read.append(lowered)
        return real(self, lowered)

    r = Redactor()
    monkeypatch.setattr(TriggerFinder, "read", counting)
    redacted = r.redact_messages(batch)
    monkeypatch.setattr(TriggerFinder, "read", real)
    long_outputs = [m.text.lower() for m in batch if m.role == "tool" and len(m.text) >= 256]
    assert len(long_outputs) == 12
    for text in long_outputs:
        assert sum(text in seen for seen in read) == 1
    oracle = Redactor(callback=lambda text: text)  # (no ledger, no prefilter: every message scanned whole)
    oracle.learn_from(batch)
    assert redacted == [oracle.redact_message(m) for m in batch]
    assert not [m for m in redacted if f"{NONCE}x9" in m.text or f"k0{NONCE}" in m.text]
