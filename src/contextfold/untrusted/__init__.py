"""Input the model chooses, handled as untrusted: tool arguments and regular expressions.

Contract: :func:`decode_arguments` (``arguments``) decodes a tool call's JSON under size and depth limits and raises
a tool error, never a crash; ``regex`` runs model-chosen patterns (and operator-supplied redaction patterns,
``TimedPattern``) with a CPU time limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .arguments import MAX_ARGUMENT_CHARS, answer_safely, decode_arguments
    from .regex import (
        PATTERN_TIME_LIMIT_S,
        InvalidPattern,
        PatternTimeout,
        TimedPattern,
        UntrustedPattern,
        search_runs,
    )

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "InvalidPattern": ".regex",
    "MAX_ARGUMENT_CHARS": ".arguments",
    "PATTERN_TIME_LIMIT_S": ".regex",
    "PatternTimeout": ".regex",
    "TimedPattern": ".regex",
    "UntrustedPattern": ".regex",
    "answer_safely": ".arguments",
    "decode_arguments": ".arguments",
    "search_runs": ".regex",
}
__all__ = [
    "MAX_ARGUMENT_CHARS", "PATTERN_TIME_LIMIT_S", "InvalidPattern", "PatternTimeout", "TimedPattern",
    "UntrustedPattern", "answer_safely", "decode_arguments", "search_runs",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
