"""``contextfold compact``: one-shot compaction of a transcript, any wire format in and out."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ._common import (
    DEFAULT_MODEL,
    EXIT_OK,
    Subparsers,
    add_session_argument,
    json_lines,
    warn_if_unknown_model,
    write_private,
)
from .convert import WIRE_FORMATS
from .replay import positive_int

if TYPE_CHECKING:
    from ..importers._session import RecordedSession

__all__ = ["register", "run"]

# Where tool outputs and archives go by default: the library's embedded defaults, so that the refs left in the
# compacted transcript can be read back with `contextfold cache read` and the original with `archive restore`.
DEFAULT_STORE = "local"
DEFAULT_ARCHIVE = ".contextfold/archive"


def register(subparsers: Subparsers) -> None:
    """Add the ``compact`` command."""
    parser = subparsers.add_parser(
        "compact",
        help="compact a transcript once and write the result",
        description="Load a transcript (any importer format), compact it as a ContextManager would when it is "
        "full (summary, retained facts, recent turns; big tool outputs cut with their full text kept by ref), and "
        "write the compacted history as JSONL. The pre-compaction transcript goes to the archive.",
        epilog="Example: contextfold compact run.traj -o compacted.jsonl --to anthropic --window 32000",
    )
    add_session_argument(parser)
    parser.add_argument("-o", "--out", required=True, metavar="OUT", help="the JSONL file to write ('-': stdout)")
    parser.add_argument("--to", choices=WIRE_FORMATS, default=None,
                        help="wire format to write (default: the transcript's own)")
    parser.add_argument("--window", type=positive_int, metavar="N",
                        help="context window in tokens to compact for (default: the model's own)")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"model whose tokenizer counts (default: {DEFAULT_MODEL})")
    parser.add_argument("--session", dest="session_id", metavar="ID", help="which session of a multi-session file")
    parser.add_argument("--instructions", metavar="TEXT", help="what the summary must keep (as a manual /compact)")
    parser.add_argument("--summarizer", default="extractive", metavar="NAME",
                        help="extractive (default, no LLM) or a provider such as openai:gpt-4o-mini")
    parser.add_argument("--store", default=DEFAULT_STORE, metavar="URL",
                        help=f"where full tool outputs are kept (default: {DEFAULT_STORE}, i.e. .contextfold/)")
    parser.add_argument("--archive", default=DEFAULT_ARCHIVE, metavar="DIR",
                        help=f"where the pre-compaction transcript is archived (default: {DEFAULT_ARCHIVE})")
    parser.add_argument("--no-redact", action="store_true",
                        help="write the compacted history as the model would see it (default: redacted like the "
                             "archive, with every secret the session saw)")
    parser.set_defaults(handler=run)


def _select(sessions: list[RecordedSession], args: argparse.Namespace) -> RecordedSession:
    from ..importers._session import SessionFileError

    if args.session_id is not None:
        chosen = [s for s in sessions if s.id == args.session_id]
        if not chosen:
            raise SessionFileError(args.session, f"no session with id {args.session_id!r}")
        return chosen[0]
    if len(sessions) != 1:
        raise SessionFileError(args.session, f"holds {len(sessions)} sessions: pick one with --session ID")
    return sessions[0]


def run(args: argparse.Namespace) -> int:
    """Load, compact, write."""
    from ..formats import get_format
    from ..importers._files import load_sessions
    from ..manager import ContextManager
    from ..replay.harness import manager_session_id

    session = _select(load_sessions(args.session), args)
    warn_if_unknown_model(args.model, window=args.window)
    target = args.to or session.format
    with ContextManager(args.model, max_context_tokens=args.window, summarizer=args.summarizer, store=args.store,
                        archive=args.archive, session_id=manager_session_id(session.id)) as cm:
        cm.add(session.messages)
        report = cm.compact(instructions=args.instructions)
        history = cm.messages()
        redactor = cm.redactor
        if not args.no_redact and redactor is not None:
            # A file the command writes, like the archive: the recent turns are kept verbatim in the view, and a
            # secret redaction took out anywhere in the session (the compaction brought its memory up to date) is
            # taken out of them too.
            history = redactor.redact_provider_state(redactor.redact_messages(history))
        items = get_format(target).encode(history)
    text = json_lines(items)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_private(out, text)  # the recent turns' tool outputs, whole: as 'archive restore' writes its file
    sys.stderr.write(f"contextfold: {session.id}: {report.line()}\n")
    return EXIT_OK
