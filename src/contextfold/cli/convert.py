"""``contextfold convert``: a recorded session as JSONL in another wire format."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ._common import EXIT_OK, Subparsers, add_session_argument, json_lines, printable, write_private

if TYPE_CHECKING:
    from ..importers._session import RecordedSession

__all__ = ["WIRE_FORMATS", "out_files", "register", "run"]

# The wire formats of the contract in DESIGN.md; listed here so ``--help`` needs no import of the formats package.
WIRE_FORMATS = ("openai_chat", "openai_responses", "anthropic", "gemini")


def register(subparsers: Subparsers) -> None:
    """Add the ``convert`` command."""
    parser = subparsers.add_parser(
        "convert",
        help="write a recorded session as JSONL in another wire format",
        description="Convert a recorded session to a provider's wire format, one message (or item) per line. "
        "A file or folder holding several sessions needs --session ID or --out-dir DIR.",
    )
    add_session_argument(parser)
    parser.add_argument("--to", required=True, choices=WIRE_FORMATS, help="the wire format to write")
    parser.add_argument("--session", dest="session_id", metavar="ID", help="convert only the session with this id")
    parser.add_argument(
        "--out-dir",
        type=Path,
        metavar="DIR",
        help="write every session to DIR/<session id>.jsonl instead of stdout",
    )
    parser.set_defaults(handler=run)


def _select(sessions: list[RecordedSession], args: argparse.Namespace) -> list[RecordedSession]:
    from ..importers._session import SessionFileError

    if args.session_id is not None:
        chosen = [s for s in sessions if s.id == args.session_id]
        if not chosen:
            raise SessionFileError(args.session, f"no session with id {args.session_id!r}")
        if len(chosen) > 1 and args.out_dir is None:
            # (only the first was written before: the others vanished without a word)
            raise SessionFileError(args.session, f"{len(chosen)} sessions have the id {args.session_id!r}: write "
                                   "each to its own file with --out-dir DIR")
        return chosen
    if len(sessions) != 1 and args.out_dir is None:
        raise SessionFileError(
            args.session, f"holds {len(sessions)} sessions: pick one with --session ID or write all with --out-dir DIR"
        )
    return sessions


def _relative_file(session_id: str) -> PurePosixPath:
    """``<session id>.jsonl``, a ``/`` in the id making folders, never a path that leaves the folder it is under.

    The id comes from the session file (a tau-bench entry's ``task_id``): a part that is empty or only dots (``..``)
    becomes ``_``, and a NUL (which no file name can hold) ``_`` too. Other characters are kept as they are.
    """
    parts = [part.replace("\0", "_") for part in session_id.split("/")]
    parts = [part if part.strip(".") else "_" for part in parts]
    *folders, name = parts
    return PurePosixPath(*folders, f"{name}.jsonl")


def out_files(sessions: list[RecordedSession]) -> list[PurePosixPath]:
    """Each session's file under ``--out-dir``, in order: one file per session, even when two share an id.

    A session whose file is taken (an id met before, or one cleaned to the same name) is written to ``<id>~2.jsonl``
    (``~3``, …), skipping every name another session is written to: overwriting the first was losing it. A path is
    taken too when it is the folder of another file (ids ``q`` and ``q-0.jsonl/z``): then the file is renamed; when
    one of its folders is another file, that folder is (``q-0.jsonl~2/z-0.jsonl``). The next number to try is kept
    per name: N sessions sharing one id try N names, not N²/2.
    """
    wanted = [_relative_file(s.id) for s in sessions]
    return _Namer(wanted).files


class _Namer:
    """The files chosen for ``wanted`` paths, in order; the first session naming a free path keeps it."""

    def __init__(self, wanted: list[PurePosixPath]) -> None:
        # Every session's own name and its folders: a renamed session never takes one of them.
        self._reserved = set(wanted)
        self._reserved_folders = {folder for path in wanted for folder in _folders(path)}
        self._files: set[PurePosixPath] = set()
        self._folders: set[PurePosixPath] = set()
        self._next_number: dict[PurePosixPath, int] = {}
        self.files = [self._choose(path) for path in wanted]

    def _is_file(self, path: PurePosixPath, renamed: bool) -> bool:
        return path in self._files or (renamed and path in self._reserved)

    def _is_taken(self, path: PurePosixPath, renamed: bool) -> bool:
        return (self._is_file(path, renamed) or path in self._folders
                or (renamed and path in self._reserved_folders))

    def _choose(self, path: PurePosixPath) -> PurePosixPath:
        chosen = path
        while blocked := [folder for folder in _folders(chosen) if self._is_file(folder, chosen != path)]:
            base = blocked[0]  # outermost first: a folder that is another session's file is renamed
            number = self._next_number.get(base, 2)
            while self._is_file(folder := base.with_name(f"{base.name}~{number}"), True):
                number += 1
            self._next_number[base] = number  # (the folder stays free for the next file renamed into it)
            chosen = folder / chosen.relative_to(base)
        if self._is_taken(chosen, chosen != path):
            base = chosen
            number = self._next_number.get(base, 2)
            while self._is_taken(chosen := base.with_name(f"{base.stem}~{number}.jsonl"), True):
                number += 1
            self._next_number[base] = number + 1
        self._files.add(chosen)
        self._folders.update(_folders(chosen))
        return chosen


def _folders(path: PurePosixPath) -> list[PurePosixPath]:
    """The folders ``path`` is under (not the top), outermost first."""
    return list(reversed(path.parents[:-1]))


def _report_renamed(sessions: list[RecordedSession], files: list[PurePosixPath]) -> None:
    """A stderr line for each name more than one session named, and each session written elsewhere than its id."""
    groups: dict[PurePosixPath, list[tuple[str, PurePosixPath]]] = {}
    for session, file in zip(sessions, files, strict=True):
        groups.setdefault(_relative_file(session.id), []).append((session.id, file))
    for name, members in groups.items():
        if len(members) == 1 and members[0][1] == name:
            continue
        written = printable(", ".join(str(file) for _, file in members))
        ids = {session_id for session_id, _ in members}
        if len(ids) == 1 and len(members) > 1:
            shown = printable(repr(members[0][0]))
            sys.stderr.write(f"contextfold: {len(members)} sessions have the id {shown}: written to {written}\n")
        elif len(members) > 1:
            shown = printable(", ".join(repr(session_id) for session_id, _ in members))
            sys.stderr.write(f"contextfold: {len(members)} sessions' ids ({shown}) make one file name {name}: "
                             f"written to {written}\n")
        else:
            shown = printable(repr(members[0][0]))
            sys.stderr.write(f"contextfold: the session {shown} would be written to {printable(str(name))}, "
                             f"another session's file or folder: written to {written}\n")


def _encode(session: RecordedSession, target: str, source: str) -> list[dict[str, Any]]:
    from ..errors import InvalidHistory
    from ..formats import get_format
    from ..importers._session import SessionFileError

    try:
        if target != "anthropic":
            return list(get_format(target).encode(session.messages))
        from ._anthropic_sendable import sendable

        items, changes = sendable(session.messages)
    except InvalidHistory as exc:
        raise SessionFileError(source, f"session {session.id}: cannot write as {target}: {exc}") from None
    if changes:  # what the file holds is not what the session held: said, so nobody takes it for a plain copy
        sys.stderr.write(f"contextfold: session {printable(session.id)}: changed to be accepted by the Anthropic "
                         f"Messages API: {'; '.join(changes)}\n")
    return items


def _lines(items: list[dict[str, Any]]) -> str:
    return json_lines(items)


def run(args: argparse.Namespace) -> int:
    """Convert and write."""
    from ..importers._files import load_sessions

    sessions = _select(load_sessions(args.session), args)
    if args.out_dir is None:
        sys.stdout.write(_lines(_encode(sessions[0], args.to, args.session)))
        return EXIT_OK
    files = out_files(sessions)
    _report_renamed(sessions, files)
    for session, file in zip(sessions, files, strict=True):
        # Session ids may hold a "/" (tau-bench: <file stem>/<task>-<trial>): that becomes a sub-folder.
        target = args.out_dir.joinpath(file)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_private(target, _lines(_encode(session, args.to, args.session)))  # whole tool outputs: the owner's
    return EXIT_OK
