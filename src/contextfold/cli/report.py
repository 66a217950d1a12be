"""``contextfold report``: the HTML report of a saved replay JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._common import EXIT_OK, Subparsers

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


def run(args: argparse.Namespace) -> int:
    """Read, check, render, write."""
    from ..report import ReportInputError, check_result, load_result, write_html

    if args.metrics == "-":
        try:
            result = json.loads(sys.stdin.read())
        except json.JSONDecodeError as exc:
            raise ReportInputError(f"<stdin>: invalid JSON: {exc.msg} (line {exc.lineno})") from None
        check_result(result, source="<stdin>")
    else:
        result = load_result(args.metrics)
    written = write_html(result, args.out)
    sys.stderr.write(f"contextfold: wrote the report to {written}\n")
    return EXIT_OK
