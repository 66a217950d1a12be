"""``contextfold gc``: apply retention now to the tool output store and the archive (both also run by themselves)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from ._common import EXIT_OK, NotFound, Subparsers, Usage, printable

__all__ = ["amount", "register", "run_gc"]

DEFAULT_STORE = "local"
DEFAULT_ARCHIVE = ".contextfold/archive"
_DAY_S = 24 * 3600
_MB = 1024 * 1024


def amount(text: str) -> float:
    """An argparse type: a finite number of zero or more.

    ``float()`` takes ``inf`` and ``nan``: an infinite size cannot become a byte count, and retention compares ages
    with NaN as false, so deletes nothing without a word.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of 0 or more, got {text!r}")
    return value


def register(subparsers: Subparsers) -> None:
    """Add ``gc``."""
    from ..cache.owners import DEFAULT_LIVE_S, DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES
    from ..stores.archive_fs import ARCHIVE_MAX_AGE_S, ARCHIVE_MAX_BYTES

    parser = subparsers.add_parser(
        "gc", help="delete old tool outputs and archived sessions (retention)",
        description="Delete cached tool outputs no session has used for --max-age-days and, over --max-mb, the "
        "least recently used (never one a session used in the last --live-hours); then archived sessions "
        "untouched for --archive-max-age-days and, over --archive-max-mb, the oldest. Managers do this by "
        "themselves; this runs it now.")
    parser.add_argument("--store", default=DEFAULT_STORE, metavar="URL",
                        help=f"the tool output store (default: {DEFAULT_STORE}, i.e. .contextfold/)")
    parser.add_argument("--archive", default=DEFAULT_ARCHIVE, metavar="DIR",
                        help=f"the archive folder (default: {DEFAULT_ARCHIVE}); 'none' to skip it")
    parser.add_argument("--max-age-days", type=amount, default=DEFAULT_MAX_AGE_S / _DAY_S, metavar="DAYS")
    parser.add_argument("--max-mb", type=amount, default=DEFAULT_MAX_BYTES / _MB, metavar="MB")
    parser.add_argument("--live-hours", type=amount, default=DEFAULT_LIVE_S / 3600, metavar="HOURS")
    parser.add_argument("--archive-max-age-days", type=amount, default=ARCHIVE_MAX_AGE_S / _DAY_S, metavar="DAYS")
    parser.add_argument("--archive-max-mb", type=amount, default=ARCHIVE_MAX_BYTES / _MB, metavar="MB")
    parser.set_defaults(handler=run_gc)


def run_gc(args: argparse.Namespace) -> int:
    """Run retention and print one line per place cleaned."""
    from ..archive import session_from_key
    from ..cache import Retention, ToolOutputCache
    from ..stores import open_blob_store
    from ..stores.archive_fs import FilesystemArchiveStore
    from .cache import local_store_missing

    for name in ("max_age_days", "max_mb", "live_hours", "archive_max_age_days", "archive_max_mb"):
        if getattr(args, name) < 0:
            raise Usage(f"must not be negative, got {getattr(args, name)}", field="--" + name.replace("_", "-"))
    missing = local_store_missing(args.store)
    archive = None if args.archive.lower() == "none" else Path(args.archive)
    if missing is not None and (archive is None or not archive.is_dir()):
        raise NotFound(f"{missing}, and no archive at {str(args.archive)!r}: nothing to clean", field="--store")
    if missing is None:
        retention = Retention(max_age_s=args.max_age_days * _DAY_S, max_bytes=int(args.max_mb * _MB),
                              live_s=args.live_hours * 3600)
        cache = ToolOutputCache(open_blob_store(args.store), retention=retention)
        try:
            result = cache.retain()
        finally:
            cache.close()
        sys.stdout.write(f"tool outputs: deleted {len(result.deleted)} ({result.bytes_freed:,} bytes), kept "
                         f"{result.kept} ({result.bytes_kept:,} bytes)\n")
    if archive is not None and archive.is_dir():
        removed = FilesystemArchiveStore(archive).prune(max_age_s=args.archive_max_age_days * _DAY_S,
                                                        max_bytes=int(args.archive_max_mb * _MB))
        # (the store names a session by its archive key: shown by its id, which a client chose)
        shown = ", ".join(printable(session_from_key(key)) for key in removed)
        sys.stdout.write(f"archive: deleted {len(removed)} session(s)" + (f": {shown}" if removed else "") + "\n")
    return EXIT_OK
