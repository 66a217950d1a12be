"""A masking turn parses no call's arguments: each call's access is read as it is added (issue 22).

The model's call arrives after the read-ahead that parses the others, so the masking turn that followed parsed it
(its JSON and the access it names, ~50 us of a ~1.2 ms turn in the lm32b loop, cold). ``add()`` of an agent's turn
now reads it, as it reads the other things masking and compaction need of a new message.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from contextfold import _background
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.steering import resources
from contextfold.telemetry import RecordingTelemetry

NONCE = "read-on-add-7e02b4"


def test_a_masking_turn_parses_no_call_added_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory", session_id=NONCE,
                        policy={"clear_at_least": 3_000, "keep_tool_io_pairs": 1, "cache_aware": False,
                                "tool_output_budget_tokens": 5_800},
                        tool_output={"max_message_tokens": 4_000}, telemetry=RecordingTelemetry())
    parsed_in_turn: list[str] = []
    in_turn: list[bool] = []
    original = resources.access_of

    def counted(rule: Any, arguments: Any) -> Any:
        if in_turn and threading.current_thread() is threading.main_thread():
            parsed_in_turn.append(str(arguments))
        return original(rule, arguments)

    monkeypatch.setattr(resources, "access_of", counted)
    cm.add([Message.system("agent"), Message.user(f"fix the bug {NONCE}")])
    paths = ["/repo/a.py", "/repo/b.py", "/repo/a.py", "/repo/c.py", "/repo/b.py", "/repo/d.py"]
    masking_turns = 0
    for i in range(12):
        # (each call's arguments new to the process: the access memo cannot know them from another test)
        arguments = {"command": "view", "path": paths[i % len(paths)], "note": f"{NONCE}-{i}"}
        call = ToolCall(f"c{i}", "str_replace_editor", json.dumps(arguments))
        body = "".join(f"{n:6}\tdef f_{n}_{NONCE}_{i}(): return {n * i}\n" for n in range(1, 120))
        cm.add(Message.assistant(f"look at {arguments['path']}", (call,)))  # the model's answer, then the tool's
        cm.add(Message.tool(call.id, body))
        maskings = cm.maskings
        in_turn.append(True)
        cm.prepare()
        in_turn.clear()
        masking_turns += cm.maskings > maskings
        _background.wait_idle()
    cm.close()
    assert masking_turns >= 3
    assert parsed_in_turn == []
