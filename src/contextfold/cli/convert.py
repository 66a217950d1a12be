"""``contextfold convert``: a recorded session as JSONL in another wire format."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
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

    A session whose file is taken (an id met before) is written to ``<id>~2.jsonl`` (``~3``, …), skipping every name
    another session is written to: overwriting the first was losing it.
    """
    wanted = [_relative_file(s.id) for s in sessions]
    taken: set[PurePosixPath] = set(wanted)
    seen: set[PurePosixPath] = set()
    files = []
    for path in wanted:
        chosen = path
        if path in seen:
            n = 2
            while (chosen := path.with_name(f"{path.stem}~{n}.jsonl")) in taken:
                n += 1
            taken.add(chosen)
        seen.add(path)
        files.append(chosen)
    return files


def _encode(session: RecordedSession, target: str, source: str) -> list[dict[str, Any]]:
    from ..errors import InvalidHistory
    from ..formats import get_format
    from ..importers._session import SessionFileError

    try:
        return list(get_format(target).encode(session.messages))
    except InvalidHistory as exc:
        raise SessionFileError(source, f"session {session.id}: cannot write as {target}: {exc}") from None


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
    shared = Counter(s.id for s in sessions)
    for session_id, count in shared.items():
        if count > 1:
            written = ", ".join(str(f) for s, f in zip(sessions, files, strict=True) if s.id == session_id)
            sys.stderr.write(f"contextfold: {count} sessions have the id {printable(repr(session_id))}: written to "
                             f"{printable(written)}\n")
    for session, file in zip(sessions, files, strict=True):
        # Session ids may hold a "/" (tau-bench: <file stem>/<task>-<trial>): that becomes a sub-folder.
        target = args.out_dir.joinpath(file)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_private(target, _lines(_encode(session, args.to, args.session)))  # whole tool outputs: the owner's
    return EXIT_OK
