"""The imported-session record and the error that names the file it came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..errors import InvalidHistory
from ..messages import Message

__all__ = ["RecordedSession", "SessionFileError", "Source"]

Source: TypeAlias = Literal["swe_agent", "tau_bench", "jsonl"]


@dataclass(frozen=True, slots=True)
class RecordedSession:
    """One recorded agent session, as provider-neutral messages.

    Attributes:
        id: A stable name: the file stem, or ``<stem>/<task_id>-<trial>`` for one tau-bench entry.
        source: Which importer read it.
        messages: The conversation, with every tool call paired to its result as the recording shows it.
        format: The wire format the session was recorded in (what a replay should validate its views against).
        metadata: What the recording says about the run (SWE-agent ``info``; tau-bench instruction, actions, reward).
    """

    id: str
    source: Source
    messages: list[Message]
    format: str = "openai_chat"
    metadata: Mapping[str, Any] = field(default_factory=dict)


class SessionFileError(InvalidHistory):
    """A session file that cannot be imported: the file, the record in it and the problem are named.

    ``record`` is the 0-based index of the record in the file (a ``history`` entry, a tau-bench entry, a JSONL
    message); ``line`` is the 1-based line number when the file is line-oriented.

    >>> raise SessionFileError("run.traj", "unknown role 'robot'", record=4, field="role")
    Traceback (most recent call last):
    contextfold.importers._session.SessionFileError: run.traj: record 4: role: unknown role 'robot'
    """

    def __init__(
        self,
        path: str | Path,
        problem: str,
        *,
        record: int | None = None,
        field: str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(problem, index=record, field=field)
        self.path = str(path)
        self.record = record
        self.line = line

    @classmethod
    def wrap(cls, path: str | Path, error: InvalidHistory, *, line: int | None = None) -> SessionFileError:
        """The same problem as ``error``, located in file ``path``."""
        return cls(path, error.problem, record=error.index, field=error.field, line=line)

    def __str__(self) -> str:
        where = [self.path]
        if self.record is not None:
            where.append(f"record {self.record}" if self.line is None else f"record {self.record} (line {self.line})")
        if self.field:
            where.append(self.field)
        return ": ".join([*where, self.problem])
