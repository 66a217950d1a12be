"""``contextfold report``: the HTML report of a saved replay JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._common import EXIT_OK, NotFound, Subparsers

__all__ = ["DEFAULT_OUT", "register", "run"]

DEFAULT_OUT = "contextfold-report.html"


def register(subparsers: Subparsers) -> None:
    """Add the ``report`` command."""
    parser = subparsers.add_parser(
        "report",
        help="write the HTML report of a replay saved with 'replay --json'",
        description="Render the self-contained HTML report (plot of tokens per turn, events, summaries, costs, "
        "retention) from the JSON that 'contextfold replay --json' printed.",
        epilog="Example: contextfold replay runs/ --json > metrics.json && contextfold report metrics.json",
    )
    parser.add_argument("metrics", metavar="METRICS.json", help="the replay JSON ('-' reads standard input)")
    parser.add_argument("-o", "--out", type=Path, default=Path(DEFAULT_OUT),
                        help=f"the HTML file to write (default: {DEFAULT_OUT})")
    parser.set_defaults(handler=run)


def _read(source: str) -> str:
    from .._files import read_input
    from ..report import ReportInputError

    try:
        # (A byte order mark first, as Windows tools write one, is skipped.)
        return sys.stdin.read().removeprefix("\ufeff") if source == "-" else read_input(source).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportInputError(f"{_name(source)}: not UTF-8 text (byte {exc.start})") from None
    except FileNotFoundError:
        raise NotFound(f"{source}: no such file") from None
    except OSError as exc:  # a folder, a device, a file too large to read
        raise ReportInputError(f"{source}: {exc.strerror or exc}") from None


def _name(source: str) -> str:
    return "<stdin>" if source == "-" else source


def run(args: argparse.Namespace) -> int:
    """Read, check, render, write."""
    from ..errors import InvalidHistory
    from ..formats._common import check_nesting, json_problem
    from ..report import ReportInputError, check_result, write_html

    source = _name(args.metrics)
    text = _read(args.metrics)
    try:
        result = json.loads(text)
        check_nesting(result)
    except (ValueError, RecursionError) as exc:  # bad JSON, a 10,000-digit number, nesting past the limit
        problem = exc.problem if isinstance(exc, InvalidHistory) else json_problem(exc)
        field = f"{exc.field}: " if isinstance(exc, InvalidHistory) and exc.field else ""
        raise ReportInputError(f"{source}: {field}{problem}") from None
    check_result(result, source=source)
    try:
        written = write_html(result, args.out)
    except (TypeError, KeyError, ValueError, AttributeError, IndexError) as exc:
        # check_result looks at the keys a replay JSON must have; a value of the wrong shape deeper down
        # (a hand-edited file) shows only while rendering.
        raise ReportInputError(f"{source}: not a replay JSON this version can render: {type(exc).__name__}: "
                               f"{exc}") from None
    sys.stderr.write(f"contextfold: wrote the report to {written}\n")
    return EXIT_OK
