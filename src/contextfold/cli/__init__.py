"""The ``contextfold`` command: a thin shell over the library.

Each command lives in its own module exposing ``register(subparsers)``, which adds a subparser and sets
``handler`` (``args -> exit code``). Adding a command is adding a module and its name to :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

from ._common import EXIT_BAD_INPUT, PROG, run_guarded

__all__ = ["COMMANDS", "build_parser", "main"]

# Command modules, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = ("replay", "report", "compact", "count", "convert", "cache", "archive", "status", "gc",
                             "serve")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, every registered command included."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Keep long-running LLM agents inside their context window: inspect, convert and replay "
        "recorded agent sessions.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name in COMMANDS:
        import_module(f".{name}", __name__).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    for stream in (sys.stdout, sys.stderr):
        # Text from a session (an id, a message) may hold a lone surrogate, which UTF-8 cannot encode: show it
        # escaped rather than fail half-way through a table. (JSON output escapes it itself, losslessly.)
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # argparse exits on --help, --version and usage errors; return the code so callers (and tests) stay in charge.
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    return run_guarded(handler, args)
