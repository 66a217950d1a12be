"""``contextfold status``: the sessions in an archive, with their compactions, summaries and events."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ..errors import StoreError
from ._common import EXIT_BACKEND, EXIT_OK, Subparsers, printable, write_json
from .archive import DEFAULT_ARCHIVE, open_archive

__all__ = ["register", "run", "session_rows"]

# Width of the session column; longer ids push the figures right, never cut.
_ID_WIDTH = 40


def register(subparsers: Subparsers) -> None:
    """Add the ``status`` command."""
    parser = subparsers.add_parser(
        "status",
        help="list the sessions in an archive with their counts",
        description="List every session in an archive: compactions (archived transcripts), summaries, events "
        "(those a rolled-back add() voided left out), and the messages of the latest archived transcript.",
    )
    parser.add_argument("--archive", default=DEFAULT_ARCHIVE, metavar="DIR",
                        help=f"the archive: a directory or s3://bucket/prefix (default: {DEFAULT_ARCHIVE})")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def session_rows(location: str, *,
                 on_unreadable: Callable[[str, StoreError], None] | None = None) -> list[dict[str, Any]]:
    """One row per archived session: id, compactions, summaries, events, messages in the latest transcript.

    ``events`` counts those that hold: an event a rolled-back ``add()`` voided (``compact.add_rolled_back``'s
    ``voided``: its cuts, warnings, trigger decision) is counted apart (``voided_events``), as the replay does.

    ``on_unreadable``: called with a session that cannot be read (a corrupt transcript, a FIFO or a folder where a
    file should be) and the error, and the session is left out; without it the error is raised.
    """
    from ..archive import archive_key, summary_name

    archive = open_archive(location)
    rows = []
    for session_id in archive.sessions():
        try:
            numbers = archive.transcript_numbers(session_id)
            names = set(archive.store.names(archive_key(session_id)))  # (the store knows the session by its key)
            latest = len(archive.transcript(session_id, numbers[-1])) if numbers else 0
            events = archive.events(session_id)
        except StoreError as exc:
            if on_unreadable is None:
                raise
            on_unreadable(session_id, exc)
            continue
        rows.append({
            "session": session_id,
            "compactions": len(numbers),
            "summaries": sum(1 for n in numbers if summary_name(n) in names),
            "events": len(events) - (voided := _voided(events)),
            "voided_events": voided,
            "latest_transcript_messages": latest,
        })
    return rows


def _voided(events: list[dict[str, Any]]) -> int:
    """How many of ``events`` a rolled-back ``add()`` of the session voided (the rollback's own event holds)."""
    voided: set[str] = set()
    for event in events:
        data = event.get("data")
        if event.get("name") == _ROLLED_BACK and isinstance(data, dict) and isinstance(data.get("voided"), list):
            voided.update(span for span in data["voided"] if isinstance(span, str))
    if not voided:
        return 0
    return sum(1 for event in events if event.get("span_id") in voided and event.get("name") != _ROLLED_BACK)


_ROLLED_BACK = "compact.add_rolled_back"  # (AddRolledBack's name: the CLI reads the archive's lines, not events)


def run(args: argparse.Namespace) -> int:
    """List the sessions; one that cannot be read is named on stderr and left out, and the exit code says so.

    One bad session (a file someone planted, a torn transcript) must not hide the others; an archive that cannot
    be read at all (every session failing the same way) still ends in a non-zero exit.
    """
    unreadable: list[dict[str, str]] = []

    def skip(session_id: str, error: StoreError) -> None:
        sys.stderr.write(f"contextfold: warning: session {session_id!r} left out: {printable(str(error))}\n")
        unreadable.append({"session": session_id, "error": str(error)})

    rows = session_rows(args.archive, on_unreadable=skip)
    status = EXIT_BACKEND if unreadable else EXIT_OK
    if args.json:
        write_json({"archive": args.archive, "sessions": rows, "unreadable": unreadable})
        return status
    out = sys.stdout
    if not rows:
        out.write(f"no sessions in {args.archive}\n")
        return status
    out.write(f"{'session':<{_ID_WIDTH}} {'compactions':>11} {'summaries':>9} {'events':>7} {'messages':>9}\n")
    for r in rows:
        out.write(f"{printable(r['session']):<{_ID_WIDTH}} {r['compactions']:>11} {r['summaries']:>9} {r['events']:>7} "
                  f"{r['latest_transcript_messages']:>9}\n")
    return status
