"""What every command shares: argument helpers, output, and the one place errors become exit codes.

Bad input never shows a traceback: it is one line on stderr, ``contextfold: <file>: record N: <problem>``, and exit
code 2 (the code argparse itself uses for a bad command line), so that scripts can tell "your input" from "our bug".
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias

from ..errors import ContextfoldError

if TYPE_CHECKING:
    from ..tokens import MessageCounter

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "Handler",
    "Subparsers",
    "add_session_argument",
    "error_line",
    "message_counter",
    "run_guarded",
    "write_json",
]

EXIT_OK = 0
# argparse exits with 2 on a bad command line; bad input files get the same code so callers handle both alike.
EXIT_BAD_INPUT = 2
# 128 + SIGINT, what shells report for a command stopped with Ctrl-C.
EXIT_INTERRUPTED = 130

PROG = "contextfold"
DEFAULT_MODEL = "gpt-4o"

Handler: TypeAlias = Callable[[argparse.Namespace], int]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_session_argument(parser: argparse.ArgumentParser) -> None:
    """The positional SESSION argument, the same for every command that reads recorded sessions."""
    parser.add_argument(
        "session",
        metavar="SESSION",
        help="a session file (.traj, tau-bench .json, .jsonl in any wire format) or a folder of them",
    )


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    """``--model``: the model whose tokenizer counts the tokens."""
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"model whose tokenizer counts tokens (default: {DEFAULT_MODEL})"
    )


def error_line(error: BaseException) -> str:
    """The single stderr line for ``error``."""
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{PROG}: {text}"


def write_json(value: Any, out: TextIO | None = None) -> None:
    """One JSON document on one line (machine output: ``--json`` and JSONL)."""
    (out or sys.stdout).write(json.dumps(value, ensure_ascii=False) + "\n")


def message_counter(model: str, format: str | None = None) -> MessageCounter:
    """The message counter for ``model``, with the per-message overhead of wire format ``format``."""
    from ..tokens import counter_for_model

    return counter_for_model(model, format=format)


def run_guarded(handler: Handler, args: argparse.Namespace, err: TextIO | None = None) -> int:
    """Run a command; contextfold errors and I/O errors become one stderr line and exit code 2."""
    stderr = err or sys.stderr
    try:
        return handler(args)
    except ContextfoldError as exc:
        stderr.write(error_line(exc) + "\n")
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # The reader went away (``| head``); that is how pipelines end, not an error worth a line.
        return EXIT_OK
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        stderr.write(f"{PROG}: {where}{exc.strerror or exc}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        stderr.write(f"{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
