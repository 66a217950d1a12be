"""Reading session files: the one place the importers touch the file system.

Everything else in the package is pure functions over parsed JSON; this module reads bytes, parses them, picks the
importer, and turns any :class:`InvalidHistory` into a :class:`SessionFileError` that names the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._files import read_input
from ..errors import InvalidHistory
from ..formats._common import check_nesting, json_problem
from ._session import RecordedSession, SessionFileError, Source
from .jsonl import iter_jsonl_lines, parse_messages
from .swe_agent import looks_like_swe_agent, parse_swe_agent
from .tau_bench import looks_like_tau_bench, parse_tau_bench

__all__ = ["SESSION_SUFFIXES", "detect_source", "load_session", "load_sessions"]

# The suffixes a folder scan picks up; anything else in a folder (READMEs, logs) is skipped.
SESSION_SUFFIXES = frozenset({".traj", ".json", ".jsonl"})
_JSONL_SUFFIX = ".jsonl"


def _looks_like_messages(data: Any) -> bool:
    return isinstance(data, list) and all(isinstance(item, Mapping) for item in data)


def detect_source(source: str | Path | Any) -> Source:
    """Which importer reads ``source``, a path or already-parsed JSON.

    A ``.jsonl`` path is JSONL; any other file is parsed and its shape inspected.

    Raises:
        InvalidHistory: The data matches no importer (a :class:`SessionFileError` when given a path).
    """
    if isinstance(source, str | Path):
        path = Path(source)
        if path.suffix == _JSONL_SUFFIX:
            return "jsonl"
        return _detect(_read_json(path), path)
    return _detect_data(source)


def _detect_data(data: Any) -> Source:
    if looks_like_swe_agent(data):
        return "swe_agent"
    if looks_like_tau_bench(data):
        return "tau_bench"
    if _looks_like_messages(data):
        return "jsonl"
    shape = f"an object with keys {sorted(data)[:5]}" if isinstance(data, Mapping) else type(data).__name__
    raise InvalidHistory(
        f"unrecognised session format ({shape}): expected a SWE-agent .traj, a tau-bench results list, "
        "or a list of messages"
    )


def _detect(data: Any, path: Path) -> Source:
    try:
        return _detect_data(data)
    except InvalidHistory as exc:
        raise SessionFileError.wrap(path, exc) from None


def _read_text(path: Path) -> str:
    try:
        # utf-8-sig: a byte order mark first (Windows PowerShell's Out-File, older Notepad) is skipped, not an error.
        return read_input(path).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SessionFileError(path, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise SessionFileError(path, exc.strerror or str(exc)) from None


def _read_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # also a 10,000-digit number or nesting past the parser's limit
        raise SessionFileError(path, json_problem(exc)) from None
    try:
        check_nesting(data)
    except InvalidHistory as exc:
        raise SessionFileError.wrap(path, exc) from None
    return data


def _load_jsonl(path: Path) -> RecordedSession:
    lines = list(iter_jsonl_lines(_read_text(path)))
    items: list[Any] = []
    for record, (number, line) in enumerate(lines):
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise SessionFileError(
                path, f"invalid JSON: {exc.msg} (column {exc.colno})", record=record, line=number
            ) from None
        except (ValueError, RecursionError) as exc:
            raise SessionFileError(path, json_problem(exc), record=record, line=number) from None
        try:
            check_nesting(items[-1], index=record)
        except InvalidHistory as exc:
            raise SessionFileError.wrap(path, exc, line=number) from None
    try:
        return parse_messages(items, session_id=path.stem)
    except InvalidHistory as exc:
        at = lines[exc.index][0] if exc.index is not None and 0 <= exc.index < len(lines) else None
        raise SessionFileError.wrap(path, exc, line=at) from None


def _load_file(path: Path) -> list[RecordedSession]:
    if path.suffix == _JSONL_SUFFIX:
        return [_load_jsonl(path)]
    data = _read_json(path)
    source = _detect(data, path)
    try:
        if source == "swe_agent":
            return [parse_swe_agent(data, session_id=path.stem)]
        if source == "tau_bench":
            return parse_tau_bench(data, stem=path.stem)
        return [parse_messages(data, session_id=path.stem)]
    except InvalidHistory as exc:
        raise SessionFileError.wrap(path, exc) from None


def session_files(path: str | Path) -> list[Path]:
    """The session files ``path`` names: itself, or every session file under a folder, sorted."""
    root = Path(path)
    if root.is_dir():
        return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in SESSION_SUFFIXES)
    if not root.exists():
        raise SessionFileError(root, "no such file or folder")
    return [root]


def load_sessions(path: str | Path) -> list[RecordedSession]:
    """Every session in a file or a folder of files (sorted by path), whatever importer each file needs.

    Raises:
        SessionFileError: A file is missing, unreadable, or malformed; the file, record and field are named.
    """
    sessions: list[RecordedSession] = []
    for file in session_files(path):
        sessions.extend(_load_file(file))
    return sessions


def load_session(path: str | Path) -> RecordedSession:
    """The one session in ``path``; an error when it holds none or several."""
    sessions = load_sessions(path)
    if len(sessions) != 1:
        ids = ", ".join(s.id for s in sessions[:3]) + (", ..." if len(sessions) > 3 else "")
        raise SessionFileError(
            path, f"expected exactly one session, found {len(sessions)}" + (f" ({ids})" if ids else "")
        )
    return sessions[0]
