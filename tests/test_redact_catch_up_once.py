"""A catch-up reads each content once: copies of a message holding a secret and stale entries in bulk (issue 22).

The first compaction of a repeated history learns its secrets (``Redactor.learn_from``): one message per content is
read, and its copies (given only an id) follow it. The copies of a message that redacts to another (it holds a
secret: 1,433 of 100,000 recorded messages) were each recalled and transplanted one by one, and the entries ``add()``
made of a bulk's ends before the catch-up learned its secrets were each re-checked by their group's first copy (794).
Now a clean-id copy takes its content's redaction with its own id, and the stale entries are renewed in one search.
What must hold: every copy redacts as a redactor with no ledger redacts it, and a secret learned anywhere in the
batch is never left bare in a copy, a message redacted before it was learned included.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.redact._messages import MessageRedactor

NONCE = "c4tchUp0nce"  # (unique to this file: no cache of another test answers for it)
TOKEN = "ghp_" + "Rk2Wz8Qm4Tn7Yp3Vb6Hc9Jd1Kf5Lg0Ms8Xw"


def _origins() -> list[Message]:
    texts = [f"plain output {NONCE} {i}" for i in range(8)]
    texts[3] = f"export GITHUB_TOKEN={TOKEN}"  # (a pattern finds it: learned where this message is read)
    texts[6] = f"later: {TOKEN[4:]} again"  # (bare: redacted only once the token above is learned)
    return [Message("tool" if i % 2 else "user", text, tool_call_id=f"c{i}" if i % 2 else None)
            for i, text in enumerate(texts)]


def _copies(order: list[int], origins: list[Message]) -> list[Message]:
    """A manager's view of a repeated history: each message a copy of an origin, given its own id."""
    return [origins[k].with_id(f"{NONCE}:{i}") for i, k in enumerate(order)]


def _oracle(view: list[Message]) -> list[Message]:
    oracle = Redactor(callback=lambda text: text)  # (a callback: no ledger, every message redacted whole)
    oracle.learn_from(view)
    return [oracle.redact_message(m) for m in view]


def _recalls(monkeypatch: pytest.MonkeyPatch) -> list[Message]:
    """The messages ``MessageRedactor._recall`` is asked about (a copy recalled one by one)."""
    asked: list[Message] = []
    real = MessageRedactor._recall

    def counting(self: MessageRedactor, m: Message, *args: object, **kwargs: object) -> Message | None:
        asked.append(m)
        return real(self, m, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(MessageRedactor, "_recall", counting)
    return asked


def test_copies_of_a_message_holding_a_secret_are_not_recalled_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 08dd6b2: each copy of the token's message (and of the one naming it bare) was recalled on its own.
    view = _copies([k % 8 for k in range(80)], _origins())
    r = Redactor()
    asked = _recalls(monkeypatch)
    r.learn_from(view)
    assert len(asked) <= 3  # (the token's first copy, read again once the token is learned; the bare one's)
    redacted = r.redact_messages(view)
    assert redacted == _oracle(view)
    for m, out in zip(view, redacted, strict=True):
        assert TOKEN not in out.text and TOKEN[4:] not in out.text
        assert out.meta["id"] == m.meta["id"]  # (each copy keeps its own id)


def test_entries_made_before_a_secret_was_learned_are_renewed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The token's message comes once, at the start; the bulk's end (what add() redacts) holds every other origin.
    # Fails on 08dd6b2: each stale group's first copy was recalled; now only the one naming the token bare is.
    order = [3] + [k for _ in range(6) for k in (0, 1, 2, 4, 5, 6, 7)]
    view = _copies(order, _origins())
    r = Redactor()
    r.redact_messages(view[-7:])  # (the end, redacted before the token is learned: its entries go stale)
    asked = _recalls(monkeypatch)
    r.learn_from(view)
    # (the token's first copy, and the copies naming it bare: they mention what was learned, so are read again)
    assert {m.text for m in asked} <= {_origins()[3].text, _origins()[6].text}
    redacted = r.redact_messages(view)
    assert redacted == _oracle(view)
    assert not [out for out in redacted if TOKEN[4:] in out.text]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order=st.lists(st.integers(0, 7), min_size=1, max_size=40), ahead=st.integers(0, 40),
       learned_id=st.booleans())
def test_the_catch_up_redacts_as_a_redactor_without_a_ledger(order: list[int], ahead: int,
                                                             learned_id: bool) -> None:
    view = _copies(order, _origins())
    r = Redactor()
    if ahead:
        r.redact_messages(view[-ahead:])  # (some redacted before the catch-up, maybe before a secret was learned)
    if learned_id:
        r.learn(f"{NONCE}:1", "password")  # (an id that is a secret: its copy is redacted on its own)
    r.learn_from(view)
    expected = _oracle(view) if not learned_id else None
    redacted = r.redact_messages(view)
    if expected is not None:
        assert redacted == expected
    for out in redacted:
        assert TOKEN[4:] not in out.text or TOKEN not in "".join(m.text for m in view)
        if learned_id:
            assert out.meta["id"] != f"{NONCE}:1"


def _unit(k: int) -> list[Message]:
    said = f"later: {TOKEN[4:]} again" if k == 6 else f"step {k} {NONCE}"
    result = f"export GITHUB_TOKEN={TOKEN}" if k == 3 else f"listing {k} {NONCE}\n" + "src/app.py\n" * 40
    return [Message.user(said), Message("assistant", "", tool_calls=(ToolCall(f"c{k}", "bash", '{"cmd": "ls"}'),)),
            Message.tool(f"c{k}", result, name="bash")]


def test_a_secret_only_in_repeated_copies_never_reaches_a_transcript_or_a_summary() -> None:
    # Through a manager: a bulk of copies (past 3,000 messages: add() redacts its ends, the catch-up the rest), the
    # token only in the compacted middle, its bare value in every part, the ends' copies redacted before it is learned.
    # (The user's own messages the view keeps verbatim are the agent's context, not text contextfold writes.)
    units = {k: _unit(k) for k in range(8)}
    order = [0, 1, 2, 4, 5, 6, 7] * 75 + [3] * 20 + [0, 1, 2, 4, 5, 6, 7] * 75
    history = [m for k in order for m in units[k]]
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory",
                        session_id=f"{NONCE}-{id(object())}")
    try:
        cm.add(history)
        view = cm.prepare_messages()
        assert cm._compactions >= 1
        assert cm.archive is not None
        written = [m.text for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
        assert len(written) >= len(history) // 2
        summaries = [m.text for m in view if m.kind is not None]
        assert summaries and any("compacted" in text for text in summaries)
        for text in [*written, *summaries]:
            assert TOKEN not in text and TOKEN[4:] not in text
        assert any(TOKEN[4:] in m.text for m in history) and any(TOKEN in m.text for m in history)
    finally:
        cm.close()
