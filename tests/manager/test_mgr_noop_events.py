"""A no-op ``prepare()`` sends the events it sent before its cost was cut (issue 22, eighteenth session, lane N).

Sessions of no-op calls (nothing to compact or mask: user, assistant with a tool call, tool result, again) in
several shapes (a system prompt and tool schemas, each wire format, ``prepare_messages()``, a check point's folded
decisions) export their events through a batch processor (built and redacted on its thread) and to a sink that
builds them at once. Both are compared with what 08dd6b2 exported (``data/noop_events_08dd6b2.json``: ``python
tests/manager/test_mgr_noop_events.py > …`` with that tree's ``src`` on the path): every field but the random span
ids, whose links (which event is whose parent) are compared instead.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _processor_exports import exported_per_session

from contextfold import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import RecordingTelemetry

GOLDEN = Path(__file__).parent / "data" / "noop_events_08dd6b2.json"
NONCE = "n8q3w"  # (in the texts: no stale cache can answer for them)
_PARAMETERS = {"type": "object", "properties": {"cmd": {"type": "string"}}}
TOOLS = [{"type": "function",
          "function": {"name": "bash", "description": f"run a command {NONCE}", "parameters": _PARAMETERS}}]
WINDOW = 1_000_000  # (far above these sessions: every call is a no-op)


def _message(i: int) -> Message:
    kind = i % 3
    if kind == 0:
        return Message.user(f"{NONCE} question {i}: " + "why does the parser fail " * (1 + i % 4))
    if kind == 1:
        return Message.assistant(f"looking {i}", [ToolCall(f"call_{i}", "bash", f'{{"cmd": "grep -n x{i} src"}}')])
    return Message.tool(f"call_{i - 1}", f"{NONCE} src/p{i}.py:{i}: x{i} = parse()\n" * (1 + i % 5))


def _session(telemetry: Any, name: str, *, system: bool = False, tools: bool = False) -> ContextManager:
    now = [datetime(2026, 11, 27, 19, 0, tzinfo=UTC)]

    def clock() -> datetime:
        now[0] += timedelta(milliseconds=3)
        return now[0]

    cm = ContextManager("gpt-4o", max_context_tokens=WINDOW, store="memory", archive=False, telemetry=telemetry,
                        session_id=f"noop-{name}", clock=clock, message_id_prefix="t",
                        tools=TOOLS if tools else ())
    cm.counter.wait_exact()  # (until the tokenizer is loaded, counts are estimates: the figures would vary)
    if system:
        cm.add(Message.system(f"You are a coding agent {NONCE}."))
    return cm


def _calls(cm: ContextManager, start: int, end: int, call: str = "openai_chat") -> None:
    for i in range(start, end):
        cm.add(_message(i))
        if call == "messages":
            cm.prepare_messages()
        else:
            cm.prepare(format=call)


def _scenarios(telemetry: Any) -> list[Any]:
    """No-op sessions of every shape; returns their sinks."""
    sinks: list[Any] = []

    def session(name: str, **shape: bool) -> ContextManager:
        sinks.append(telemetry())
        return _session(sinks[-1], name, **shape)

    cm = session("chat")
    cm.add([_message(i) for i in range(30)])
    _calls(cm, 30, 42)
    _calls(cm, 42, 45, "messages")
    cm.prepare()  # (a second call on the same view)
    cm.prepare()
    cm = session("pinned", system=True, tools=True)
    _calls(cm, 0, 10)
    _calls(cm, 10, 16, "anthropic")
    _calls(cm, 16, 22, "openai_responses")
    cm.check("a caller's check")
    cm.prepare()
    return sinks


def _linked(records: list[dict[str, Any]]) -> list[str]:
    """Each record as JSON, its span id and parent id replaced by the order the span ids appeared in."""
    order: dict[str, int] = {}
    for r in records:
        order.setdefault(r["span_id"], len(order))
    return [json.dumps({**r, "span_id": order[r["span_id"]],
                        "parent_id": None if r["parent_id"] is None else order.get(r["parent_id"], "elsewhere")})
            for r in records]


def _exported() -> list[list[str]]:
    """What each session exports through a processor (events built and redacted on its thread)."""
    return [_linked(records) for records in exported_per_session(_scenarios)]


def test_a_noop_prepare_exports_the_events_08dd6b2_exported() -> None:
    golden = json.loads(GOLDEN.read_text())
    assert _exported() == golden
    names = {json.loads(line)["name"] for session in golden for line in session}
    assert {"prepare", "compact.token_estimate"} <= names


def test_a_sink_that_builds_at_once_gets_the_same_events() -> None:
    built = [_linked([e.to_dict() for e in sink.events]) for sink in _scenarios(RecordingTelemetry)]
    assert built == json.loads(GOLDEN.read_text())


if __name__ == "__main__":  # (writes the golden file's content with the tree on the path)
    json.dump(_exported(), sys.stdout, indent=0)
