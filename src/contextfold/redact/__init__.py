"""Secret redaction, applied before anything leaves the process (exporters, archive, summaries, digests, CLI output).

Contract: :class:`Redactor` replaces secrets found by the built-in rules (:mod:`contextfold.redact.rules`: rules with
context that reject code, provider token shapes, key files, encoded keys) and by user patterns (run under a time
limit; one that runs past it redacts the whole text), and remembers every value it takes out in a
:class:`SecretMemory` so that a later bare mention is redacted too. A session's memory lives in its blob store
(``SecretMemory(store, session_id)``), so a restarted process or another worker knows what the session saw.
``Redactor.for_telemetry()`` also drops personal data (e-mail addresses, phone and card numbers) from what leaves
the process; ``personal_data`` moves that line. :meth:`Redactor.safe_cut` and :meth:`Redactor.blank` let code that
cuts or quotes text never split or repeat a secret.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._redactor import PERSONAL_DATA_CHOICES, Finding, Redactor, marker
    from .memory import LEARN_MIN_CHARS, MAX_LEARNED, SecretMemory
    from .rules import BUILTIN_PATTERNS, SecretPattern

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "BUILTIN_PATTERNS": ".rules",
    "Finding": "._redactor",
    "LEARN_MIN_CHARS": ".memory",
    "MAX_LEARNED": ".memory",
    "PERSONAL_DATA_CHOICES": "._redactor",
    "Redactor": "._redactor",
    "SecretMemory": ".memory",
    "SecretPattern": ".rules",
    "marker": "._redactor",
}
__all__ = [
    "BUILTIN_PATTERNS", "LEARN_MIN_CHARS", "MAX_LEARNED", "PERSONAL_DATA_CHOICES", "Finding", "Redactor",
    "SecretMemory", "SecretPattern", "marker",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
