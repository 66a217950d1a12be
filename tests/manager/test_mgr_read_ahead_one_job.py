"""The read-ahead of a turn is one job of the background thread (issue 22): its parts (the new messages read as a
compaction will, the whole outputs' secrets, the calls' accesses for steering's mask order) were three jobs, each
waiting for the agent's call to return and counted on its own (+1,390 jobs in the lm32b loop at 16K).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from contextfold import _background
from contextfold.manager import ContextManager
from contextfold.manager._read_ahead import run_parts
from contextfold.messages import Message, ToolCall
from contextfold.steering import resources


def _turn(nonce: str, i: int) -> list[Message]:
    call = ToolCall(f"c{i}", "str_replace_editor",
                    json.dumps({"command": "view", "path": f"/srv/{nonce}/module_{i}.py"}))
    body = "\n".join(f"{n}: def load_{nonce}_{i}_{n}(): return {n * 7}  # KeyError took {n} ms" for n in range(20))
    return [Message.assistant(f"Reading module_{i}.", [call]), Message.tool(f"c{i}", body, name="str_replace_editor")]


def test_one_turn_of_read_ahead_is_one_job_that_does_every_part(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    jobs: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
    submit = _background.submit

    def counted(job: Callable[..., Any], *args: Any) -> bool:
        jobs.append((job, args))
        return submit(job, *args)

    monkeypatch.setattr(_background, "submit", counted)
    parsed: list[str] = []
    access = resources._access_of_call

    def noted(rule: Any, arguments: str) -> Any:
        parsed.append(arguments)
        return access(rule, arguments)

    monkeypatch.setattr("contextfold.steering._state._access_of_call", noted)
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory",
                        session_id=f"one-job-{nonce}", message_id_prefix="j")
    history = [Message.system("You fix bugs."), Message.user(f"Fix load_{nonce}.")]
    for i in range(10):
        history += _turn(nonce, i)
    cm.add(history)
    assert cm.budgets.soft // 2 < cm.tokens() < cm.budgets.soft  # read ahead at the next prepare()
    assert cm.steering.superseded and cm.redactor is not None
    cm.prepare()
    _background.wait_idle()
    assert len(jobs) == 1  # (three on 44ddfa8)
    # Every part ran: each call's arguments parsed for steering, in the one job.
    assert [json.loads(a)["path"] for a in parsed] == [f"/srv/{nonce}/module_{i}.py" for i in range(10)]
    cm.close()


def test_a_part_that_fails_does_not_keep_the_next_from_running() -> None:
    ran: list[str] = []

    def fails() -> None:
        raise RuntimeError("a warm-up that failed")

    run_parts([(ran.append, ("first",)), (fails, ()), (ran.append, ("last",))])
    assert ran == ["first", "last"]
