"""One batch or one message at a time: ``add()`` must give the same view, the same archive and the same events.

Seventh session, issue 22: the bulk add skips per-message calls whose first test would return at once (marking,
foreign refs, the large-input warning, the never-sent cut), counts a batch at once (``count_each``), checks each
message object once per call (``check_messages``) and gives a repeated history's copies an origin
(``Message._origin``) that redaction and the transcript answer by. Each of those is only a shortcut if a batch and
the same messages added one by one cannot be told apart: the property below adds hostile histories (copies of one
message object, a secret only in one copy's id or name, malformed-looking but valid tool calls, an output over the
write-time cap, a user paste over the large-input limit) both ways and compares what contextfold writes.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import RecordingTelemetry

SECRET = "AKIAIOSFODNN7EXAMPLE"
PASSWORD = "hunter2-Kx9vQ7mZ"


def _exchange(k: int, shape: int) -> list[Message]:
    """A tool exchange of one of a few shapes (the call ids are the exchange's own)."""
    call = f"call_{k}"
    if shape == 0:
        args, name, out = '{"path": "a.py"}', "read", "line of output\n" * 20
    elif shape == 1:
        args, name, out = json.dumps({"token": SECRET}), "login", f"logged in with password={PASSWORD}"
    elif shape == 2:
        args, name, out = '{"q": "x"}', "grep", "match: " + "y" * 120 + "\n" * 1 + "z\n" * 3000  # over the cap
    else:
        args, name, out = "{}", "tool \u2028 name", "\ud800 lone surrogate and\x00nul"
    return [Message("assistant", "", tool_calls=(ToolCall(call, name, args),)),
            Message("tool", out, tool_call_id=call, name=name)]


@st.composite
def histories(draw: Any) -> list[Message]:
    """A history with copies of the same message objects (a repeated history), ids given or not."""
    units: list[list[Message]] = []
    for k in range(draw(st.integers(1, 4))):
        units.append([Message("user", draw(st.sampled_from(["look", f"my password: {PASSWORD}", "again"])))])
        units.append(_exchange(k, draw(st.integers(0, 3))))
    base = [m for unit in units for m in unit]
    out: list[Message] = []
    rename = draw(st.booleans())
    for rep in range(draw(st.integers(1, 3))):
        for j, m in enumerate(base):
            how = draw(st.sampled_from(["same-object", "own-id", "secret-id", "no-id"]))
            if how == "own-id":
                m = m.with_meta(id=f"r{rep}-{j}")
            elif how == "secret-id":
                m = m.with_meta(id=f"{SECRET}-{rep}-{j}")
            elif how == "same-object" and rep:
                m = m.with_meta(id=f"dup-{j}")  # a copy of a copy: the same origin
            out.append(m)
        if rename:  # (else the call ids repeat across repetitions, as in sessions replayed one after another)
            out = [_renamed(m, rep) if i >= len(out) - len(base) else m for i, m in enumerate(out)]
    if draw(st.booleans()):
        out.append(Message("user", "paste " + "q" * 40_000))  # over the large-input limit set below
    out.append(Message("user", "and now?"))
    return out


def _renamed(m: Message, rep: int) -> Message:
    if m.role == "tool" and m.tool_call_id:
        return _with_call_id(m, f"{m.tool_call_id}-{rep}")
    if m.tool_calls:
        return Message(m.role, m.content, tool_calls=tuple(ToolCall(f"{c.id}-{rep}", c.name, c.arguments)
                                                          for c in m.tool_calls), meta=m.meta)
    return m


def _with_call_id(m: Message, call_id: str) -> Message:
    return Message(m.role, m.content, tool_call_id=call_id, name=m.name, meta=m.meta)


def _run(history: list[Message], batch: bool, session: str) -> dict[str, Any]:
    sink = RecordingTelemetry()
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=session,
                        telemetry=sink, message_id_prefix="m",
                        policy={"large_input_bytes": 32_000})
    if batch:
        cm.add(history)
    else:
        for m in history:
            cm.add(m)
    view = cm.prepare()
    cm.compact(force=True)
    after = cm.prepare()
    cm.close()
    assert cm.archive is not None
    archived = [(m.role, m.text, m.tool_call_id, m.name, dict(m.meta), [(c.id, c.name, c.arguments)
                                                                        for c in m.tool_calls])
                for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
    return {"view": view, "after": after, "archived": archived,
            "events": [type(e).__name__ for e in sink.events if type(e).__name__ != "TurnMetrics"],
            "written": json.dumps(archived, default=str)}


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_a_batch_and_the_same_messages_one_by_one_give_the_same_view_archive_and_events(
        history: list[Message]) -> None:
    one_batch = _run(history, True, "rt7-batch")
    one_by_one = _run(history, False, "rt7-batch")
    assert one_batch["view"] == one_by_one["view"]
    assert one_batch["after"] == one_by_one["after"]
    assert one_batch["archived"] == one_by_one["archived"]
    assert one_batch["events"] == one_by_one["events"]
    # (the view is the model's, redacted only with apply_to_model; a RecordingTelemetry sees events before egress)
    for run in (one_batch, one_by_one):
        for secret in (SECRET, PASSWORD):
            at = run["written"].find(secret)
            assert at < 0, run["written"][max(0, at - 400) : at + 60]
