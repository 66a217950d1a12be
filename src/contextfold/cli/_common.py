"""What every command shares: argument helpers, output, and the one place errors become exit codes.

A failure is never a traceback: it is one line on stderr, ``contextfold: <file>: record N: <field>: <problem>``
(as much of the location as the failure has), and an exit code that says which kind of failure it was, so that
scripts can tell "your input" from "your options", "not there", "the system" and "our bug":

====  ==========================================================================================================
code  meaning
====  ==========================================================================================================
0     success
1     ``replay``: at least one session failed inside the harness (the others are reported)
2     bad command line (argparse) or bad input: a file, record or field that cannot be read or is malformed
3     bad option value or configuration: an unknown summarizer, model or store URL, an invalid policy file
4     not found: no such archive, session, store or cached output
5     operating-system error: a file that cannot be read or written (permissions, disk full)
6     a feature needs an optional dependency that is not installed (the line names the extra)
7     a backend failed: the store, the summarizer's provider, or compaction could not fit the budget
70    internal error: a bug in contextfold (the line names the exception; please report it)
130   interrupted (Ctrl-C)
====  ==========================================================================================================
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias

from ..errors import (
    ConfigError,
    ContextfoldError,
    ContextOverflowError,
    InsufficientBudget,
    MissingExtra,
    RecoveryFailed,
    RefNotFound,
    StoreError,
    SummarizerError,
    UnknownModel,
)

if TYPE_CHECKING:
    from ..tokens import MessageCounter

__all__ = [
    "EXIT_BACKEND",
    "EXIT_BAD_INPUT",
    "EXIT_BAD_OPTION",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_MISSING_EXTRA",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_OS_ERROR",
    "Handler",
    "NotFound",
    "Subparsers",
    "Usage",
    "add_session_argument",
    "error_line",
    "exit_code_for",
    "json_lines",
    "message_counter",
    "printable",
    "run_guarded",
    "warn_if_unknown_model",
    "write_json",
]

EXIT_OK = 0
# argparse exits with 2 on a bad command line; bad input files get the same code so callers handle both alike.
EXIT_BAD_INPUT = 2
EXIT_BAD_OPTION = 3
EXIT_NOT_FOUND = 4
EXIT_OS_ERROR = 5
EXIT_MISSING_EXTRA = 6
EXIT_BACKEND = 7
# EX_SOFTWARE from sysexits.h: the conventional code for "internal software error".
EXIT_INTERNAL = 70
# 128 + SIGINT, what shells report for a command stopped with Ctrl-C.
EXIT_INTERRUPTED = 130


class NotFound(ConfigError):
    """What a command was pointed at is not there: an archive, a session in it, a store (exit code 4)."""


class Usage(ConfigError):
    """A bad command line that argparse cannot catch itself (exit code 2, as argparse's own usage errors).

    A missing subcommand, arguments that exclude each other, a malformed pattern.
    """


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


def printable(text: str) -> str:
    """``text`` for a terminal: control characters (and other unprintable ones) written as Python escapes them.

    Session ids and error messages quote what clients sent (a proxy's session header): written as they were, an
    escape sequence could retitle or clear the operator's terminal, and a newline forge a row of a listing.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def error_line(error: BaseException) -> str:
    """The single stderr line for ``error``."""
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{PROG}: {printable(text)}"


def exit_code_for(error: ContextfoldError) -> int:
    """The exit code of a contextfold error (see the table in this module's docstring)."""
    if isinstance(error, Usage):
        return EXIT_BAD_INPUT
    if isinstance(error, NotFound | RefNotFound):
        return EXIT_NOT_FOUND
    if isinstance(error, MissingExtra):
        return EXIT_MISSING_EXTRA
    if isinstance(error, ConfigError | UnknownModel):
        return EXIT_BAD_OPTION
    if isinstance(error, StoreError | SummarizerError | InsufficientBudget | RecoveryFailed | ContextOverflowError):
        return EXIT_BACKEND
    return EXIT_BAD_INPUT


def write_json(value: Any, out: TextIO | None = None) -> None:
    """One JSON document on one line (machine output: ``--json`` and JSONL)."""
    (out or sys.stdout).write(json_lines([value]))


def json_lines(items: Any) -> str:
    """JSON Lines text of ``items``, writable as UTF-8 even when a string holds a lone surrogate (escaped)."""
    from ..serialize import json_text

    return "".join(json_text(item) + "\n" for item in items)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` readable by the owner only: restored histories hold whole tool outputs.

    A new file is created 0600 whatever the umask; an existing one is emptied and made 0600 before the text goes in.
    Only a regular file's mode is changed: ``-o /dev/null`` or a FIFO is the machine's (or another program's) and
    keeps its own, else root's run would leave /dev/null 0600 for every user and a user's run would fail on EPERM.
    """
    import os
    import stat

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode) and mode & 0o077:
            os.fchmod(fd, 0o600)
        fh.write(text)


def warn_if_unknown_model(model: str, *, window: int | None = None) -> None:
    """A stderr warning when ``model`` is not in the registry: its tokenizer and prices (and window) are guesses."""
    from ..errors import shown
    from ..tokens import lookup_model

    if lookup_model(model, with_prices=False) is None:
        guessed = "tokenizer and prices" if window is not None else "tokenizer, prices and window"
        sys.stderr.write(f"{PROG}: warning: unknown model {shown(model)}: its {guessed} are guessed "
                         "(tokens are estimated, costs unknown); pass a known --model for exact figures\n")


def message_counter(model: str, format: str | None = None) -> MessageCounter:
    """The message counter for ``model``, with the per-message overhead of wire format ``format``."""
    from ..tokens import counter_for_model

    return counter_for_model(model, format=format)


def run_guarded(handler: Handler, args: argparse.Namespace, err: TextIO | None = None) -> int:
    """Run a command; every failure becomes one stderr line and its exit code, never a traceback."""
    stderr = err or sys.stderr
    try:
        return handler(args)
    except ContextfoldError as exc:
        stderr.write(error_line(exc) + "\n")
        return exit_code_for(exc)
    except BrokenPipeError:
        # The reader went away (``| head``); that is how pipelines end, not an error worth a line.
        return EXIT_OK
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        stderr.write(f"{PROG}: {where}{exc.strerror or exc}\n")
        return EXIT_OS_ERROR
    except KeyboardInterrupt:
        stderr.write(f"{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: still one line, with what is needed to report it
        stderr.write(f"{PROG}: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:500]} "
                     "(this is a bug in contextfold; please report it with the command line)\n")
        return EXIT_INTERNAL
