"""``contextfold count``: messages and tokens of recorded sessions."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ._common import (
    EXIT_OK,
    Subparsers,
    add_model_argument,
    add_session_argument,
    message_counter,
    warn_if_unknown_model,
    write_json,
)

if TYPE_CHECKING:
    from ..tokens import MessageCounter

__all__ = ["register", "run"]

# Width of the session-id column in the human-readable table; longer ids push the figures right, never cut.
_ID_WIDTH = 40


def register(subparsers: Subparsers) -> None:
    """Add the ``count`` command."""
    parser = subparsers.add_parser(
        "count",
        help="count the messages and tokens of recorded sessions",
        description="Count the messages and tokens of a recorded session file or a folder of them. "
        "Tokens are what the model's tokenizer gives for the messages' text and tool calls, with per-message "
        "overhead.",
    )
    add_session_argument(parser)
    add_model_argument(parser)
    parser.add_argument(
        "--json", action="store_true", help='print {"messages": N, "tokens": T} (plus "sessions" for several)'
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Count and print."""
    from ..importers._files import load_sessions

    sessions = load_sessions(args.session)
    warn_if_unknown_model(args.model)
    counters: dict[str, MessageCounter] = {}
    rows: list[dict[str, int | str]] = []
    messages = tokens = 0
    for session in sessions:
        counter = counters.get(session.format)
        if counter is None:
            counter = counters[session.format] = message_counter(args.model, session.format)
        n, t = len(session.messages), counter.count_messages(session.messages)
        rows.append({"id": session.id, "messages": n, "tokens": t})
        messages, tokens = messages + n, tokens + t
    total = {"messages": messages, "tokens": tokens}
    if args.json:
        write_json({**total, "sessions": rows} if len(rows) > 1 else total)
        return EXIT_OK
    out = sys.stdout
    out.write(f"{'session':<{_ID_WIDTH}} {'messages':>9} {'tokens':>11}\n")
    for row in rows:
        out.write(f"{row['id']:<{_ID_WIDTH}} {row['messages']:>9} {row['tokens']:>11}\n")
    if len(rows) > 1:
        label = f"total ({len(rows)} sessions)"
        out.write(f"{label:<{_ID_WIDTH}} {messages:>9} {tokens:>11}\n")
    return EXIT_OK
