"""What a compaction took out of the view leaves the redactor's ledger once its transcript is written.

The ledger (``redact/_ledger.Ledger``) keeps each message redacted, with its result, so that the summarizer's input and
the transcript are not scanned again (issue 22). Once the transcript is written nothing asks for the messages the
compaction removed, but their entries stayed until the character cap (256M) shed them: 100,000 distinct recorded
messages held 149M characters there after their first ``prepare()``, the view being 41 messages, and each entry of an
output holding a secret kept the output and its redacted copy.
"""

from __future__ import annotations

from contextfold import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.redact import _ledger

NONCE = "s15r2gone"
OUTPUT_CHARS = 3_000
TURNS = 8


def _turn(i: int) -> list[Message]:
    # (the secrets in the user's text: an output would be masked, its original leaving the view before any compaction)
    body = f"{NONCE} run {i}\n" + "the build step passed, nothing to see here\n" * (OUTPUT_CHARS // 43)
    return [
        Message.user(body + f"\nexport DB_PASSWORD=Zq{i:04d}{NONCE}Kx9\n"),
        Message("assistant", "", tool_calls=(ToolCall(f"c{i}", "bash", '{"cmd": "make"}'),)),
        Message.tool(f"c{i}", f"{NONCE} ok {i}", name="bash"),
    ]


def _session() -> ContextManager:
    return ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory",
                          session_id=f"{NONCE}-{id(object())}")


def _ledger_of(cm: ContextManager) -> _ledger.Ledger:
    ledger: _ledger.Ledger = cm.redactor._message_redactor.ledger
    return ledger


def test_a_compaction_forgets_what_it_removed() -> None:
    # Fails on 96ca2cf: every message the compaction removed kept its entry (and its redacted copy).
    cm = _session()
    try:
        gone: list[Message] = []
        for i in range(TURNS):
            cm.add(_turn(i))
            cm.prepare()
            if i % 4 == 3:
                before = cm.messages()
                cm.compact()
                after = {id(m) for m in cm.messages()}
                gone += [m for m in before if id(m) not in after]
        assert cm._compactions >= 1 and len(gone) >= 6
        ledger = _ledger_of(cm)
        held = [m for m in gone if ledger.recorded(m)]
        assert not held, f"{len(held)} of {len(gone)} removed messages still in the ledger"
        removed = {id(m) for m in gone}
        assert not [e for e in ledger._by_content.values() if id(e[0]) in removed]
        # The view's outputs are still there: the next transcript reads them from the ledger.
        missing = [m.text[:30] for m in cm.messages() if m.text.startswith(NONCE) and not ledger.recorded(m)]
        assert not missing, missing
    finally:
        cm.close()


def test_the_text_the_ledger_keeps_after_compactions_is_the_views() -> None:
    # The figure behind the test above: the characters of text the ledger's entries keep alive (each text once).
    # 96ca2cf: every message of the session and the redacted copies of those holding a secret.
    cm = _session()
    try:
        for i in range(TURNS):
            cm.add(_turn(i))
            cm.prepare()
            if i % 4 == 3:
                cm.compact()
        assert cm._compactions >= 1
        view_chars = sum(_ledger.message_chars(m) for m in cm.messages())
        held = _ledger_of(cm)._held_chars()
        # (the view's messages and the redacted copies of those holding a secret, and the entries' own cost)
        assert held < 2 * view_chars + 5_000, f"the ledger keeps {held} characters, the view {view_chars}"
    finally:
        cm.close()
