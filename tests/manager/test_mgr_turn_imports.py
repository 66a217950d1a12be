"""A masking turn runs no import statement on the agent's thread (issue 22).

Modules a manager uses on every turn but must not load with it (``from contextfold import ContextManager`` loads
the manager alone: tests/test_cold_start.py) were imported inside the functions that use them; each such statement
resolves its package through importlib's Python code on every call (~15 of them a masking turn of the lm32b loop,
~3 us each warm, more on a turn's cold caches). They are read through ``contextfold._lazy.LazyModule`` or imported
with a module that loads with the manager anyway.
"""

from __future__ import annotations

import builtins
import json
import threading
from typing import Any

import pytest

from contextfold import _background
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import RecordingTelemetry

NONCE = "turn-imports-1f9c3e"

# What a masking turn may still import: nothing (the read-ahead's hand-over imported the placeholder's shape on
# every call before; now only when a tool name's shape is first counted).
ALLOWED: set[tuple[str, str]] = set()


def test_a_masking_turn_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory", session_id=NONCE,
                        policy={"clear_at_least": 3_000, "keep_tool_io_pairs": 1, "cache_aware": True,
                                "tool_output_budget_tokens": 5_800},
                        tool_output={"max_message_tokens": 4_000}, telemetry=RecordingTelemetry())
    imported: list[tuple[str, str]] = []
    watching: list[bool] = []
    original = builtins.__import__

    def counted(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if watching and watching[-1] and threading.current_thread() is threading.main_thread():
            imported.append((str((globals or {}).get("__name__")), name))
        return original(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", counted)
    cm.add([Message.system("agent"), Message.user(f"fix the bug {NONCE}")])
    masking_turns = watched = 0
    for i in range(16):
        call = ToolCall(f"c{i}", "str_replace_editor", json.dumps({"command": "view", "path": f"/repo/{i % 5}.py"}))
        body = "".join(f"{n:6}\tdef f_{n}_{NONCE}_{i}(): return {n * i}\n" for n in range(1, 120))
        cm.add([Message.assistant("look", (call,)), Message.tool(call.id, body)])
        maskings, before = cm.maskings, len(imported)
        watching.append(masking_turns > 0)  # (the first masking imports what it uses: the later ones are watched)
        cm.prepare()
        watching.clear()
        if cm.maskings == maskings:
            del imported[before:]  # (a turn that did not mask: not what this test is about)
        elif masking_turns:
            watched += 1
        masking_turns += cm.maskings > maskings
        _background.wait_idle()
    cm.close()
    assert watched >= 2
    assert set(imported) <= ALLOWED
