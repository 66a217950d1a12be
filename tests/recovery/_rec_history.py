"""Histories and managers for the recovery tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import RecordingTelemetry


def tool_turn(i: int, lines: int = 40) -> list[Message]:
    """One assistant tool call and its result (about 10 tokens per line of output)."""
    call = ToolCall(f"call_{i}", "bash", json.dumps({"cmd": f"cat f{i}.py"}))
    output = "".join(f"    value_{i}_{k} = compute({k}, {i})\n" for k in range(lines))
    return [Message.assistant(f"step {i}", [call]), Message.tool(call.id, output, name="bash")]


def history(turns: int, lines: int = 40, start: int = 0) -> list[Message]:
    out = [Message.system("You are a coding agent."), Message.user("fix the bug in parser.py")] if start == 0 else []
    for i in range(start, start + turns):
        out.extend(tool_turn(i, lines))
    return out


def manager(tmp_path: Path, *, window: int = 60_000, **kw: Any) -> tuple[ContextManager, RecordingTelemetry]:
    """A manager whose own window is large (overflows come from the smaller provider window), and its events."""
    events = RecordingTelemetry()
    cm = ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive=str(tmp_path / "archive"),
                        telemetry=events, session_id="s1", **kw)
    return cm, events


class Clock:
    """A clock the test moves (the manager's ``clock``): expiry without sleeping."""

    def __init__(self) -> None:
        self.at = datetime(2026, 11, 27, 22, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at


def session(tmp_path: Path, store: object = "memory", clock: Clock | None = None, sid: str = "s1",
            window: int = 60_000) -> ContextManager:
    """A gpt-4o manager of ``window`` tokens on ``store``, archived under ``tmp_path``."""
    return ContextManager("gpt-4o", max_context_tokens=window, store=store, archive=str(tmp_path / "archive"),
                          session_id=sid, clock=clock)
