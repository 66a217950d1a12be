"""The HTML report of a replay: one self-contained file with the tokens-per-turn plot, events, summaries, costs.

>>> from contextfold.report import render_html
>>> html = render_html(replay_json)  # doctest: +SKIP

The page needs nothing but a browser: CSS and the SVG plot are inline, there is no script and no network access.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ContextfoldError
from .page import render_html
from .svg import token_plot

__all__ = ["ReportInputError", "check_result", "load_result", "render_html", "token_plot", "write_html"]

# The top-level keys a replay JSON must have for the page to be drawn.
_REQUIRED = ("sessions", "turns", "valid_rate", "tokens_sent", "tokens_sent_baseline", "per_session")
# Keys every per-session entry must have.
_REQUIRED_SESSION = ("id", "source", "series", "totals", "events", "summaries", "thresholds")


class ReportInputError(ContextfoldError, ValueError):
    """A metrics file that is not a replay JSON: the file and the missing or wrong key are named."""


def load_result(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a replay JSON written by ``contextfold replay --json``."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8-sig"))  # (a byte order mark first is skipped)
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path}: invalid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise ReportInputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    check_result(value, source=str(path))
    return value  # type: ignore[no-any-return]


def check_result(value: Any, *, source: str = "replay JSON") -> None:
    """Raise :class:`ReportInputError` naming the first missing key when ``value`` is not a replay JSON."""
    if not isinstance(value, Mapping):
        raise ReportInputError(f"{source}: expected a JSON object from 'contextfold replay --json'")
    for key in _REQUIRED:
        if key not in value:
            raise ReportInputError(f"{source}: {key}: missing (expected the output of 'contextfold replay --json')")
    if not isinstance(value["per_session"], list):
        raise ReportInputError(f"{source}: per_session: expected a list")
    for n, session in enumerate(value["per_session"]):
        if not isinstance(session, Mapping):
            raise ReportInputError(f"{source}: per_session[{n}]: expected an object")
        for key in _REQUIRED_SESSION:
            if key not in session:
                raise ReportInputError(f"{source}: per_session[{n}].{key}: missing")


def write_html(result: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render ``result`` and write it to ``path`` (atomically: a reader never sees half a page)."""
    check_result(result)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(render_html(result), encoding="utf-8")
    os.replace(tmp, target)
    return target
