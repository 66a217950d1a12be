"""Pure text budgeting: head and tail within a token or byte budget, line caps, and structure-aware cuts.

Contract: :func:`truncate_text` keeps head and tail with a marker saying what was cut (``_text``); outputs of a few
long lines (minified JSON, one-line responses) are cut by structure or characters instead (``shape``). Each cutter
takes an optional :data:`CutGuard` that keeps a cut out of a secret (``Redactor.safe_cut``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._text import (
        DEFAULT_HEAD_RATIO,
        MAX_LINE_LENGTH,
        SERIALIZATION_BUFFER,
        CutGuard,
        TruncatedText,
        TruncationUnit,
        truncate_text,
    )
    from .shape import FEW_LINES, cut_by_chars, is_few_long_lines, shape_json

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "CutGuard": "._text",
    "DEFAULT_HEAD_RATIO": "._text",
    "FEW_LINES": ".shape",
    "MAX_LINE_LENGTH": "._text",
    "SERIALIZATION_BUFFER": "._text",
    "TruncatedText": "._text",
    "TruncationUnit": "._text",
    "cut_by_chars": ".shape",
    "is_few_long_lines": ".shape",
    "shape_json": ".shape",
    "truncate_text": "._text",
}
__all__ = [
    "DEFAULT_HEAD_RATIO",
    "FEW_LINES",
    "MAX_LINE_LENGTH",
    "SERIALIZATION_BUFFER",
    "CutGuard",
    "TruncatedText",
    "TruncationUnit",
    "cut_by_chars",
    "is_few_long_lines",
    "shape_json",
    "truncate_text",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
