"""tau-bench trajectory files: a JSON list of ``{task_id, trial, reward, info, traj}`` entries.

``traj`` is plain OpenAI Chat Completions messages. Each entry becomes one session; its metadata keeps what a replay
needs to judge retention: the simulated user's hidden ``instruction`` (its constraints) and the expected ``actions``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidHistory
from ..formats._common import expect_mapping, type_name
from ._chat import decode_chat
from ._session import RecordedSession, Source

__all__ = ["looks_like_tau_bench", "parse_tau_bench", "parse_tau_bench_entry"]

SOURCE: Source = "tau_bench"


def looks_like_tau_bench(data: Any) -> bool:
    """Whether parsed JSON has the shape of a tau-bench results file (a list of entries with a ``traj``)."""
    return isinstance(data, list) and bool(data) and all(isinstance(e, Mapping) and "traj" in e for e in data)


def _task(info: Mapping[str, Any]) -> Mapping[str, Any]:
    task = info.get("task")
    return task if isinstance(task, Mapping) else {}


def parse_tau_bench_entry(entry: Any, index: int, *, stem: str) -> RecordedSession:
    """Entry ``index`` of a tau-bench file; errors name the entry as the record and ``traj[i].field`` as the field."""
    obj = expect_mapping(entry, index, None)
    traj = obj.get("traj")
    if not isinstance(traj, list):
        raise InvalidHistory(f"expected a list of messages, got {type_name(traj)}", index=index, field="traj")
    info = obj.get("info", {})
    if not isinstance(info, Mapping):
        raise InvalidHistory(f"expected an object, got {type_name(info)}", index=index, field="info")
    task_id = obj.get("task_id", index)
    trial = obj.get("trial", 0)
    for key, value in (("task_id", task_id), ("trial", trial)):
        if not isinstance(value, int | str) or isinstance(value, bool):
            raise InvalidHistory(f"expected a number or a string, got {type_name(value)}", index=index, field=key)
    messages = [decode_chat(m, index, prefix=f"traj[{j}]") for j, m in enumerate(traj)]
    task = _task(info)
    metadata = {
        "task_id": task_id,
        "trial": trial,
        "reward": obj.get("reward"),
        "instruction": task.get("instruction"),
        "actions": task.get("actions", []),
        "user_id": task.get("user_id"),
        "info": dict(info),
    }
    return RecordedSession(f"{stem}/{task_id}-{trial}", SOURCE, messages, "openai_chat", metadata)


def parse_tau_bench(data: Any, *, stem: str) -> list[RecordedSession]:
    """Every entry of a parsed tau-bench file, in file order."""
    if not isinstance(data, list):
        raise InvalidHistory(f"not a tau-bench file: expected a list of entries, got {type_name(data)}")
    return [parse_tau_bench_entry(entry, i, stem=stem) for i, entry in enumerate(data)]
