"""A secret learned after its bare value was read, recorded clean and memoized: caught in everything written.

Attacks this session's memoized work (led9's ledger entry per origin for a repeated history's copies, sum9's
transcript lines cut from the read-ahead's, ahead9's lazily read compaction material): the value first arrives bare
(no rule recognises it), in copies of one message (the same object added again: copies sharing an origin) and in
equal messages, is read ahead, learned from, prepared and masked; only later does a message reveal it in context
(``export DB_PASSWORD=...``). The archive (transcripts, summaries, events), the summary in the view and the events
must hold it nowhere.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.archive import MemoryArchiveStore
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import RecordingTelemetry


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return [str(value)]


def _written(store: MemoryArchiveStore, session: str) -> list[str]:
    texts: list[str] = []
    for name in store.names(session):
        raw = (store.read(session, name) or b"").decode()
        texts.append(raw)
        docs = [json.loads(raw)] if name.endswith(".json") else [json.loads(line) for line in raw.splitlines()]
        texts += [s for d in docs for s in _strings(d)]
    return texts


@settings(max_examples=6, deadline=None)
@given(copies=st.integers(1, 4), same_object=st.booleans(), prepare_before=st.booleans(),
       bare_in=st.sampled_from(["user", "tool"]), reveal_in=st.sampled_from(["user", "tool"]),
       turns_between=st.integers(0, 3))
def test_a_secret_learned_late_is_caught_in_every_copy(copies: int, same_object: bool, prepare_before: bool,
                                                        bare_in: str, reveal_in: str, turns_between: int) -> None:
    nonce = uuid.uuid4().hex[:8]
    secret = f"Qz{nonce}Vr9Kd4Lp"
    session = f"s-{nonce}"
    store = MemoryArchiveStore()
    telemetry = RecordingTelemetry()
    cm = ContextManager("gpt-4o", store="memory", archive=store, session_id=session, telemetry=telemetry,
                        max_context_tokens=100_000, policy={"keep_recent_turns": 1, "retain_last_turns": 0})
    try:
        cm.add(Message.user(f"Set up the service ({nonce})."))
        filler = " ".join(f"checked module_{nonce}_{i} and its tests" for i in range(40))
        bare_text = f"The value to use is {secret} for the login. {filler}"
        shared_user = Message.user(bare_text)
        for k in range(copies):
            if bare_in == "user":
                cm.add(shared_user if same_object else Message.user(bare_text))
                cm.add(Message.assistant(f"Noted {k}."))
            else:
                call = ToolCall(f"c{k}-{nonce}", "cat", json.dumps({"path": f"notes_{k}.txt"}))
                cm.add(Message.assistant("", [call]))
                cm.add(Message.tool(call.id, bare_text, name="cat"))
            if prepare_before:
                cm.prepare()
        for k in range(turns_between):
            cm.add(Message.user(f"Next {k}. {filler}"))
            cm.add(Message.assistant(f"Done {k}."))
            cm.prepare()
        reveal = f"export DB_PASSWORD={secret}"
        if reveal_in == "user":
            cm.add(Message.user(f"Run: {reveal}"))
        else:
            call = ToolCall(f"env-{nonce}", "bash", json.dumps({"cmd": "cat .env"}))
            cm.add(Message.assistant("", [call]))
            cm.add(Message.tool(call.id, f"HOME=/root\n{reveal}\nPATH=/bin", name="bash"))
        cm.add(Message.assistant("Configured."))
        cm.add(Message.user("Next."))
        cm.prepare()
        report = cm.compact()
        view = cm.prepare()
        cm.archive_view()
    finally:
        cm.close()
    written = _written(store, session)
    assert report.summary is not None and any(name.startswith("summary-") for name in store.names(session))
    assert any("REDACTED" in s for s in written)  # (the copies were archived, the value in them redacted)
    assert not [s for s in written if secret in s]
    summaries = [m for m in view if "summary" in json.dumps(m.get("content"))[:200].lower()]
    assert not [m for m in summaries if secret in json.dumps(m)]
    assert not [e for e in telemetry.events if secret in json.dumps(e.to_dict(), default=str)]


def test_readings_remembered_from_another_session_do_not_carry_its_ignorance() -> None:
    """Readings are remembered by text, process-wide: a session that never learned the value reads it first."""
    nonce = uuid.uuid4().hex[:8]
    secret = f"Wm{nonce}Tx4Hb7Ns"
    filler = " ".join(f"checked module_{nonce}_{i} and its tests" for i in range(40))
    bare_text = f"The value to use is {secret} for the login. {filler}"

    def session(name: str, reveal_first: bool) -> tuple[MemoryArchiveStore, Any]:
        store = MemoryArchiveStore()
        cm = ContextManager("gpt-4o", store="memory", archive=store, session_id=name, max_context_tokens=100_000,
                            policy={"keep_recent_turns": 1, "retain_last_turns": 0})
        try:
            cm.add(Message.user(f"Set up the service ({nonce})."))
            if reveal_first:
                call = ToolCall(f"env-{nonce}", "bash", json.dumps({"cmd": "cat .env"}))
                cm.add(Message.assistant("", [call]))
                cm.add(Message.tool(call.id, f"HOME=/root\nexport DB_PASSWORD={secret}\nPATH=/bin", name="bash"))
            for k in range(3):
                call = ToolCall(f"c{k}-{nonce}", "cat", json.dumps({"path": f"notes_{k}.txt"}))
                cm.add(Message.assistant("", [call]))
                cm.add(Message.tool(call.id, bare_text, name="cat"))
                cm.prepare()
            cm.add(Message.assistant("Configured."))
            cm.add(Message.user("Next."))
            report = cm.compact()
            cm.archive_view()
        finally:
            cm.close()
        return store, report

    ignorant, _ = session(f"b-{nonce}", reveal_first=False)
    assert any(secret in s for s in _written(ignorant, f"b-{nonce}"))  # (it read the value: nothing told it)
    knowing, report = session(f"a-{nonce}", reveal_first=True)
    assert report.summary is not None
    assert not [s for s in _written(knowing, f"a-{nonce}") if secret in s]
