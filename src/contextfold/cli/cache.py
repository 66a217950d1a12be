"""``contextfold cache``: read and search the full tool outputs that views refer to by ref."""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING

from ._common import EXIT_OK, Subparsers
from .replay import positive_int

if TYPE_CHECKING:
    from ..cache import ToolOutputCache

__all__ = ["register", "run_grep", "run_read"]

DEFAULT_STORE = "local"
# A page of a cached output: about what a file-reading tool shows at once.
DEFAULT_READ_LIMIT = 200
# Enough matches to see where a string occurs without flooding the terminal.
DEFAULT_MAX_MATCHES = 100


def _store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=DEFAULT_STORE, metavar="URL",
                        help=f"the tool output store (default: {DEFAULT_STORE}, i.e. .contextfold/; "
                        "local:///dir, redis://…)")


def register(subparsers: Subparsers) -> None:
    """Add ``cache read`` and ``cache grep``."""
    parser = subparsers.add_parser(
        "cache",
        help="read or search cached tool outputs by ref",
        description="Tool outputs too big for the context are kept whole in the tool output cache; views show "
        "their ref (tout_ and 16 hex digits). Read them by line range or search them with a regular expression.",
    )
    commands = parser.add_subparsers(title="cache commands", metavar="COMMAND")
    read = commands.add_parser("read", help="print lines of a cached output",
                               description="Print lines OFFSET.. of the cached output REF, numbered.")
    read.add_argument("ref", metavar="REF", help="the ref id (tout_…)")
    read.add_argument("--offset", type=positive_int, default=1, help="first line, 1-based (default: 1)")
    read.add_argument("--limit", type=positive_int, default=DEFAULT_READ_LIMIT,
                      help=f"number of lines (default: {DEFAULT_READ_LIMIT})")
    _store_argument(read)
    read.set_defaults(handler=run_read)
    grep = commands.add_parser("grep", help="search cached outputs with a regular expression",
                               description="Print the lines matching PATTERN (a Python regular expression) in one "
                               "cached output (--ref) or in all of them, as ref:line:text.")
    grep.add_argument("pattern", metavar="PATTERN", help="a regular expression")
    grep.add_argument("--ref", metavar="REF", help="search only this output")
    grep.add_argument("-C", "--context", type=int, default=0, metavar="N", help="lines of context around matches")
    grep.add_argument("--max-matches", type=positive_int, default=DEFAULT_MAX_MATCHES, metavar="N",
                      help=f"stop after N matches (default: {DEFAULT_MAX_MATCHES})")
    _store_argument(grep)
    grep.set_defaults(handler=run_grep)
    parser.set_defaults(handler=_usage)


def _usage(args: argparse.Namespace) -> int:
    from ..errors import ConfigError

    raise ConfigError("missing: 'read' or 'grep' (see contextfold cache --help)", field="cache")


def _cache(url: str) -> ToolOutputCache:
    from ..cache import ToolOutputCache
    from ..stores import open_blob_store

    return ToolOutputCache(open_blob_store(url))


def run_read(args: argparse.Namespace) -> int:
    """Print a slice of a cached output."""
    result = _cache(args.store).read(args.ref, args.offset, args.limit)
    sys.stdout.write(result.format() + "\n")
    return EXIT_OK


def run_grep(args: argparse.Namespace) -> int:
    """Print matching lines."""
    from ..errors import ConfigError

    try:
        re.compile(args.pattern)
    except re.error as exc:
        raise ConfigError(f"invalid regular expression {args.pattern!r}: {exc}", field="PATTERN") from None
    result = _cache(args.store).grep(args.pattern, args.ref, context=max(0, args.context),
                                     max_matches=args.max_matches)
    sys.stdout.write(result.format() + "\n")
    return EXIT_OK
