"""``contextfold archive restore``: a session's full original history, rebuilt from its archive.

The tool outputs read back from the store are redacted like the archive (the session's secret memory is in the
store beside them) unless ``--no-redact`` asks for them as they are.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ._common import EXIT_OK, NotFound, Subparsers, Usage, json_lines, printable, write_private
from .convert import WIRE_FORMATS

if TYPE_CHECKING:
    from ..archive import Archive

__all__ = ["DEFAULT_ARCHIVE", "open_archive", "register", "run_restore"]

DEFAULT_ARCHIVE = ".contextfold/archive"
DEFAULT_STORE = "local"


def register(subparsers: Subparsers) -> None:
    """Add ``archive restore``."""
    parser = subparsers.add_parser(
        "archive",
        help="rebuild a session's original history from its archive",
        description="Every compaction archives the view it replaces; 'restore' merges those transcripts back into "
        "the history as the agent wrote it, masked and truncated tool outputs read back from the tool output cache. "
        "Messages added after the latest compaction are only in the live session's view, not in the archive.",
    )
    commands = parser.add_subparsers(title="archive commands", metavar="COMMAND")
    restore = commands.add_parser(
        "restore", help="write a session's full original history as JSONL",
        description="Write the session's original history, one message per line, in a wire format.",
    )
    restore.add_argument("session_id", metavar="SESSION", help="the session id (as 'contextfold status' lists it)")
    restore.add_argument("--archive", default=DEFAULT_ARCHIVE, metavar="DIR",
                         help=f"the archive: a directory or s3://bucket/prefix (default: {DEFAULT_ARCHIVE})")
    restore.add_argument("--store", default=DEFAULT_STORE, metavar="URL",
                         help=f"the tool output store full outputs are read from (default: {DEFAULT_STORE})")
    restore.add_argument("--to", choices=WIRE_FORMATS, default="openai_chat",
                         help="wire format to write (default: openai_chat)")
    restore.add_argument("-o", "--out", default="-", metavar="OUT", help="the file to write (default: stdout)")
    restore.add_argument("--no-redact", action="store_true",
                         help="write the tool outputs read back from the store as they are (by default they are "
                         "redacted like the archive, with every secret the session saw)")
    restore.set_defaults(handler=run_restore)
    parser.set_defaults(handler=_usage)


def _usage(args: argparse.Namespace) -> int:
    raise Usage("missing: 'restore' (see contextfold archive --help)", field="archive")


def open_archive(location: str) -> Archive:
    """The archive at a directory or URL; a directory that does not exist is an error, not an empty archive."""
    from ..archive import Archive
    from ..stores.archive_open import open_archive_store

    if "://" not in location and not Path(location).is_dir():
        raise NotFound(f"no archive at {location!r} (no such directory)", field="--archive")
    return Archive(open_archive_store(location))


def run_restore(args: argparse.Namespace) -> int:
    """Restore and write."""
    from ..cache import ToolOutputCache
    from ..formats import get_format
    from ..replay.harness import manager_session_id
    from ..stores import open_blob_store
    from .cache import local_store_missing

    archive = open_archive(args.archive)
    sessions = archive.sessions()
    session_id = args.session_id if args.session_id in sessions else manager_session_id(args.session_id)
    if session_id not in sessions:
        known = ", ".join(sessions[:5]) + (", …" if len(sessions) > 5 else "")
        raise NotFound(f"no session {args.session_id!r} in the archive {args.archive}"
                       + (f" (it has: {known})" if known else " (it is empty)"), field="SESSION")
    missing = local_store_missing(args.store)
    if missing is None:
        # The session's own cache: an archived line naming another session's ref stays a view (issue 21 §4).
        store = open_blob_store(args.store)
        cache = ToolOutputCache(store, session_id=session_id)
        history = archive.restore_history(session_id, resolve_ref=cache.get, on_bad_line=_skipped)
        if not args.no_redact:
            # The outputs read back from the store are whole: redacted like the archive, with the session's memory.
            from ..redact import Redactor, SecretMemory

            redactor = Redactor(memory=SecretMemory(store, session_id))
            history = redactor.redact_provider_state(redactor.redact_messages(history))
    else:  # restore what the archive has rather than create an empty store to read nothing from
        sys.stderr.write(f"contextfold: warning: {missing}: masked and truncated outputs stay as their views\n")
        history = archive.restore_history(session_id, on_bad_line=_skipped)
    items = get_format(args.to).encode(history)
    text = json_lines(items)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        write_private(Path(args.out), text)
        sys.stderr.write(f"contextfold: restored {len(history)} messages of {printable(session_id)} to "
                         f"{printable(str(args.out))}\n")
    return EXIT_OK


def _skipped(problem: str) -> None:
    """A transcript line that is not a message (torn by a crash, damaged): the rest is restored, the user is told."""
    sys.stderr.write(f"contextfold: warning: skipped {printable(problem)}\n")  # (a line of a tampered file)
