"""A turn's read-ahead job runs no import statement on the background thread once warm (issue 22).

Each import statement inside a function resolves its package through importlib's Python code on every call; on the
read-ahead's cold caches (its job runs once a turn, after the agent's work) that was ~15-20 us a job for the digests'
module alone, ~17 ms CPU per 1M tokens of the lm32b loop's read-ahead (bench/bench_read_ahead_parts.py). The
digests' module is read through ``contextfold._lazy.LazyModule``; the superseded reads' fold goes on from the one
kept (a copy) without importing its class.
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

NONCE = "ahead-imports-7c2e91"

# What a warm turn's read-ahead may still import: the fold's class when it starts again after a rewrite (a masking
# changed the view: once per masking, not per turn).
ALLOWED = {("contextfold.manager._masking", "steering.resources")}


@pytest.mark.parametrize("digest", ["full", "light"])
def test_a_warm_read_ahead_imports_nothing(monkeypatch: pytest.MonkeyPatch, digest: str) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory",
                        session_id=f"{NONCE}-{digest}",
                        policy={"clear_at_least": 3_000, "keep_tool_io_pairs": 1, "mask_digest": digest,
                                "tool_output_budget_tokens": 5_800},
                        tool_output={"max_message_tokens": 4_000})
    imported: list[tuple[str, str]] = []
    watching: list[bool] = []
    original = builtins.__import__

    def counted(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if watching and threading.current_thread().name == "contextfold-background":
            imported.append((str((globals or {}).get("__name__")), name))
        return original(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", counted)
    cm.add([Message.system("agent"), Message.user(f"fix the bug {NONCE}")])
    digested = cm.cache.placeholders if cm.cache is not None else None
    for i in range(16):
        call = ToolCall(f"c{i}", "str_replace_editor", json.dumps({"command": "view", "path": f"/repo/{i % 5}.py"}))
        body = "".join(f"{n:6}\tdef f_{n}_{NONCE}_{i}(): return {n * i}\n" for n in range(1, 120))
        cm.add([Message.assistant("look", (call,)), Message.tool(call.id, body)])
        cm.prepare()
        if i >= 4:
            watching.append(True)  # (the first turns' jobs import what the read-ahead uses: the later ones are watched)
        _background.wait_idle()
    cm.close()
    assert digested is not None and len(digested) >= 4  # (placeholders were built ahead in the watched turns)
    assert cm.maskings >= 1
    assert set(imported) <= ALLOWED, imported
