"""``contextfold convert``: a recorded session as JSONL in another wire format."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import EXIT_OK, Subparsers, add_session_argument, json_lines

if TYPE_CHECKING:
    from ..importers._session import RecordedSession

__all__ = ["WIRE_FORMATS", "register", "run"]

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
        return chosen
    if len(sessions) != 1 and args.out_dir is None:
        raise SessionFileError(
            args.session, f"holds {len(sessions)} sessions: pick one with --session ID or write all with --out-dir DIR"
        )
    return sessions


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
    for session in sessions:
        # Session ids may hold a "/" (tau-bench: <file stem>/<task>-<trial>): that becomes a sub-folder.
        target = args.out_dir / f"{session.id}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_lines(_encode(session, args.to, args.session)), encoding="utf-8")
    return EXIT_OK
