"""Secret redaction, applied before anything leaves the process (exporters, archive, summaries).

Contract: :class:`Redactor` replaces secrets found by the rules in :mod:`contextfold.redact._redactor.rules` (rules with
context that reject code, provider token shapes, PEM blocks, encoded keys) and by user patterns, and remembers
random-looking secrets it found so a later bare mention is redacted too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._redactor import LEARN_MIN_CHARS, MAX_LEARNED, Finding, Redactor, marker
    from .rules import BUILTIN_PATTERNS, SecretPattern

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "BUILTIN_PATTERNS": ".rules",
    "Finding": "._redactor",
    "LEARN_MIN_CHARS": "._redactor",
    "MAX_LEARNED": "._redactor",
    "Redactor": "._redactor",
    "SecretPattern": ".rules",
    "marker": "._redactor",
}
__all__ = [
    "BUILTIN_PATTERNS", "LEARN_MIN_CHARS", "MAX_LEARNED", "Finding", "Redactor", "SecretPattern", "marker",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
