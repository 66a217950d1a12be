"""The paced read-ahead redacts in bulk slices (issue 22: one by one, it scanned every text the prefilter clears).

``Redactor.redact_ahead`` (the background thread's, paced) must learn and record what redacting the messages one by
one does; it only skips the scans of texts holding no trigger and nothing any pattern needs, and leaves the batch the
ledger keeps for a compaction's next call alone.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from redact_corpus import CODE, SECRETS

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.redact._scanner import Scanner

_NONCE = "q7v3k"
_PLAIN = f"plain words of a listing {_NONCE} " * 20  # (no trigger of any pattern, over the heads' minimum length)


def test_the_paced_read_ahead_does_not_scan_what_the_prefilter_clears(monkeypatch) -> None:
    redactor = Redactor()
    outputs = [Message.tool(f"c{n}", f"{_PLAIN} {n}") for n in range(12)]
    scanned: list[str] = []
    plain_scan = Scanner.scan

    def counting(self: Scanner, text: str) -> object:
        scanned.append(text)
        return plain_scan(self, text)

    monkeypatch.setattr(Scanner, "scan", counting)
    assert redactor.redact_ahead(outputs) == len(outputs)
    assert not [text for text in scanned if _NONCE in text]
    assert all(redactor.is_clean(m) for m in outputs)


def test_the_paced_read_ahead_leaves_the_kept_batch_alone() -> None:
    redactor = Redactor()
    batch = [Message.user(f"first {_NONCE}"), Message.assistant(f"second {_NONCE}")]
    redactor.redact_messages(batch)
    kept = redactor._message_redactor.ledger._batch
    redactor.redact_ahead([Message.user(f"another {_NONCE}")])
    assert redactor._message_redactor.ledger._batch is kept


_TEXTS = [item.text for item in (*SECRETS, *CODE)]
_message = st.builds(
    lambda role, text, args: (Message.tool("c1", text) if role == "tool" else
                              Message.assistant(text, tool_calls=(ToolCall("c1", "bash", args),))
                              if role == "assistant" else Message.user(text)),
    st.sampled_from(["tool", "assistant", "user"]), st.sampled_from(_TEXTS) | st.just(_PLAIN),
    st.sampled_from(['{"cmd": "ls"}', '{"cmd": "export GITHUB_TOKEN=ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"}']))


@settings(max_examples=40, deadline=None)
@given(st.lists(_message, max_size=24))
def test_the_paced_read_ahead_learns_and_records_what_one_by_one_does(batch: list[Message]) -> None:
    ahead, one = Redactor(), Redactor()
    ahead.redact_ahead(batch)
    for m in batch:
        one.redact_message(m)
    assert set(ahead._learned) >= set(one._learned)
    # What each message redacts to afterwards is what a redactor that learned the batch first gives.
    fresh = Redactor()
    fresh.learn_from(batch)
    assert [ahead.redact_message(m) for m in batch] == [fresh.redact_message(m) for m in batch]
