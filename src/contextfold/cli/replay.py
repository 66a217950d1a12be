"""``contextfold replay``: replay recorded sessions through contextfold and measure what the model would have seen."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import DEFAULT_MODEL, EXIT_OK, Subparsers, Usage, warn_if_unknown_model, write_json
from .convert import WIRE_FORMATS

if TYPE_CHECKING:
    from ..replay.harness import ReplayOptions

__all__ = ["DEMO_WINDOW", "EXIT_SESSION_FAILED", "check_summarizer", "positive_int", "register", "run"]

# The demo session's raw history peaks near 33K tokens; masking alone keeps it under a 16K window, so the demo
# runs in 8K, where contextfold has to mask and to compact — which is what the demo is there to show.
DEMO_WINDOW = 8_000
# A session that crashed the harness (our bug, not the input's) makes the run fail without hiding the others.
EXIT_SESSION_FAILED = 1


def positive_int(text: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {value}")
    return value


def register(subparsers: Subparsers) -> None:
    """Add the ``replay`` command."""
    parser = subparsers.add_parser(
        "replay",
        help="replay recorded sessions through contextfold and measure every turn",
        description="Replay a recorded agent session (or a folder of them) through a ContextManager: before each "
        "assistant turn, build the view the model would have received and measure its tokens, validity, cost with "
        "and without prompt caching, and how many of the facts the turn uses are still in view or retrievable. "
        "Prints a summary table; --json prints every figure; --html writes a self-contained report.",
        epilog="Example: contextfold replay --demo --html contextfold-report.html",
    )
    parser.add_argument("session", metavar="SESSION", nargs="?",
                        help="a session file (.traj, tau-bench .json, .jsonl in any wire format) or a folder of them")
    parser.add_argument("--demo", action="store_true",
                        help=f"replay the session bundled with contextfold (window {DEMO_WINDOW:,} unless --window)")
    parser.add_argument("--model", default=None, help=f"model whose tokenizer and prices apply (default: "
                        f"{DEFAULT_MODEL}, or the policy file's model)")
    parser.add_argument("--window", type=positive_int, metavar="N",
                        help="simulated context window in tokens (default: the model's own)")
    parser.add_argument("--policy", metavar="FILE.yaml", type=Path,
                        help="a contextfold configuration file; its policy (and model and window, unless given "
                        "here) apply")
    parser.add_argument("--summarizer", default="extractive", metavar="NAME",
                        help="extractive (default: no LLM, no network) or a provider such as openai:gpt-4o-mini")
    parser.add_argument("--format", choices=WIRE_FORMATS, default=None,
                        help="wire format to build and validate views in (default: each session's own)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object (table on stderr)")
    parser.add_argument("--html", metavar="OUT", type=Path, help="write the HTML report to OUT")
    parser.add_argument("--dump-views", metavar="DIR", type=Path,
                        help="write every view as sent, the session's secrets redacted, to "
                        "DIR/<session>/<turn>.jsonl (a '/' in a session id makes a sub-folder; <turn> is the index of "
                        "the answering assistant message)")
    parser.add_argument("--jobs", type=positive_int, metavar="N", help="worker processes (default: one per core)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show the progress bar on stderr (default: only when stderr is a terminal)")
    parser.add_argument("--store", default="memory", metavar="URL",
                        help="tool output store: memory (default), local, local:///dir, redis://…")
    parser.add_argument("--archive", default=None, metavar="DIR",
                        help="keep the archives (pre-compaction transcripts, summaries) in DIR (default: in memory)")
    parser.add_argument("--telemetry", nargs="+", metavar="NAME", default=None,
                        help="also export every replayed session's events: ariadne[:URL], otel[:ENDPOINT], "
                        "jsonl:PATH, console (default: the policy file's telemetry exporters, if any)")
    parser.set_defaults(handler=run)


def _options(args: argparse.Namespace) -> ReplayOptions:
    """Build and check the options in this process, so that a bad value is one line and not a crash per worker."""
    from ..compaction import Policy
    from ..replay.harness import ReplayOptions
    from ..tokens import get_model

    policy: dict[str, Any] = {}
    model, window = args.model, args.window
    telemetry: list[str] = list(args.telemetry or [])
    if args.policy is not None:
        from ..config import load_settings
        from ..manager._build import settings_arguments

        settings = load_settings(args.policy, env={})
        policy = dict(settings.policy)
        model = model or settings.model
        window = window or settings.max_context_tokens
        if args.telemetry is None:
            telemetry = list(settings_arguments(settings)["telemetry"] or [])
    if telemetry:
        from ..exporters import telemetry_sink

        for spec in telemetry:  # a bad name is one line here, not a failure per worker
            sink = telemetry_sink(spec)
            getattr(sink, "shutdown", lambda: None)()
    if window is None and args.demo:
        window = DEMO_WINDOW
    model = model or DEFAULT_MODEL
    info = get_model(model, context_window=window)
    warn_if_unknown_model(model, window=window)
    Policy.model_validate(policy).budgets(info.context_window)
    check_summarizer(args.summarizer)
    return ReplayOptions(
        model=model, window=window, policy=policy or None, summarizer=args.summarizer, format=args.format,
        dump_views=str(args.dump_views) if args.dump_views is not None else None, store=args.store,
        archive=args.archive, telemetry=tuple(telemetry),
    )


def check_summarizer(spec: str) -> None:
    """Build the summarizer ``spec`` names once, here, so that a bad name fails before any session is replayed."""
    from ..errors import ConfigError, ContextfoldError, MissingExtra

    if spec == "extractive":
        return
    from ..providers import get_provider

    try:
        get_provider(spec)
    except MissingExtra:
        raise
    except ContextfoldError as exc:
        raise ConfigError(f"{spec!r}: {exc}", field="--summarizer") from None
    except Exception as exc:  # the vendor's SDK refused it (no API key, bad option): say so, as an option error
        raise ConfigError(f"{spec!r}: {type(exc).__name__}: {exc}", field="--summarizer") from None


def run(args: argparse.Namespace) -> int:
    """Replay, print the table (and JSON), write the report."""
    from ..importers._files import load_sessions
    from ..replay import demo_session_path
    from ..replay.runner import Progress, run_replay, summary_table

    if args.demo and args.session:
        raise Usage("give a SESSION or --demo, not both", field="SESSION")
    if not args.demo and not args.session:
        raise Usage("missing: give a session file or folder, or --demo for the bundled session",
                          field="SESSION")
    path = demo_session_path() if args.demo else args.session
    options = _options(args)
    sessions = load_sessions(path)
    progress = Progress(len(sessions), sys.stderr, enabled=args.progress)
    result = run_replay(sessions, options, jobs=args.jobs, progress=progress)
    table = summary_table(result)
    if args.json:
        sys.stderr.write(table)
        write_json(result)
    else:
        sys.stdout.write(table)
    if args.html is not None:
        from ..report import write_html

        written = write_html(result, args.html)
        sys.stderr.write(f"contextfold: wrote the report to {written}\n")
    return EXIT_SESSION_FAILED if result["failed_sessions"] else EXIT_OK
