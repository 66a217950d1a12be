"""``contextfold cache``: read and search the full tool outputs that views refer to by ref.

What is printed is redacted (issue 21): by the rules, and with every secret a session of the store remembered
there; ``--no-redact`` prints the outputs as they are stored.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ._common import EXIT_OK, NotFound, Subparsers, Usage
from .replay import positive_int

if TYPE_CHECKING:
    from ..cache import ToolOutputCache
    from ..redact import Redactor

__all__ = ["local_store_missing", "register", "run_grep", "run_read"]

DEFAULT_STORE = "local"
# A page of a cached output: about what a file-reading tool shows at once.
DEFAULT_READ_LIMIT = 200
# Enough matches to see where a string occurs without flooding the terminal.
DEFAULT_MAX_MATCHES = 100


def _store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=DEFAULT_STORE, metavar="URL",
                        help=f"the tool output store (default: {DEFAULT_STORE}, i.e. .contextfold/; "
                        "local:///dir, redis://…)")


def _redact_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-redact", action="store_true",
                        help="print the outputs as they are stored (by default secrets are redacted, with every "
                        "secret a session of the store remembered)")


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
    _redact_argument(read)
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
    _redact_argument(grep)
    grep.set_defaults(handler=run_grep)
    parser.set_defaults(handler=_usage)


def _usage(args: argparse.Namespace) -> int:
    raise Usage("missing: 'read' or 'grep' (see contextfold cache --help)", field="cache")


def local_store_missing(url: str) -> str | None:
    """Why a local store ``url`` cannot be read (its file does not exist), or None; other stores are not checked."""
    from urllib.parse import unquote, urlsplit

    from ..stores._sqlite import DEFAULT_DIRECTORY
    from ..stores.local import DEFAULT_FILENAME

    text = url.strip()
    scheme, _, rest = text.partition(":")
    if scheme.lower() != "local":
        return None
    directory = (unquote(urlsplit(text).netloc + urlsplit(text).path) if rest else "") or DEFAULT_DIRECTORY
    path = Path(directory) / DEFAULT_FILENAME
    return None if path.is_file() else f"no tool output store at {str(path)!r} (nothing was cached there)"


def _cache(url: str) -> ToolOutputCache:
    from ..cache import ToolOutputCache
    from ..stores import open_blob_store

    missing = local_store_missing(url)
    if missing is not None:  # opening would create an empty store and answer "no match"
        raise NotFound(f"{missing}: pass --store to read another", field="--store")
    return ToolOutputCache(open_blob_store(url))


def run_read(args: argparse.Namespace) -> int:
    """Print a slice of a cached output."""
    cache = _cache(args.store)
    redactor = _redactor(cache, args)
    result = cache.read(args.ref, args.offset, args.limit)
    sys.stdout.write((redactor.redact_text(result.format()) if redactor else result.format()) + "\n")
    return EXIT_OK


def run_grep(args: argparse.Namespace) -> int:
    """Print matching lines."""
    try:
        re.compile(args.pattern)
    except re.error as exc:
        raise Usage(f"invalid regular expression {args.pattern!r}: {exc}", field="PATTERN") from None
    cache = _cache(args.store)
    redactor = _redactor(cache, args)
    result = cache.grep(args.pattern, args.ref, context=max(0, args.context), max_matches=args.max_matches)
    sys.stdout.write((redactor.redact_text(result.format()) if redactor else result.format()) + "\n")
    return EXIT_OK


def _redactor(cache: ToolOutputCache, args: argparse.Namespace) -> Redactor | None:
    """What the printed text goes through: the rules and the store's remembered secrets (None with --no-redact).

    The cache gets it too, so that a long line is never cut inside a secret (a piece of one matches no rule).
    """
    if args.no_redact:
        return None
    from ..redact import Redactor, SecretMemory

    redactor = Redactor(memory=SecretMemory.of_store(cache.store))
    cache.secrets = redactor
    return redactor
