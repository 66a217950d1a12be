"""The words a key the key rule redacts the value of ends with: a leaf module, imported without the redactor.

The key rule (``rules.SECRET_KEY``) reads them, the pattern gate looks for them (``_gate``), and a digest moves an
assignment to such a key ahead of the value it assigns (``cache._digest``), which should not load the redaction
machinery to know them.
"""

from __future__ import annotations

__all__ = ["KEY_NAME_WORDS"]

# The words a mapping key the key rule (``rules.SECRET_KEY``) redacts the value of ends with. Such a key ends where a
# string ends, in the lower-cased strings of a message joined by ``_ledger.SEPARATOR`` (a key of meta, or decoded
# from arguments), or before its closing quote in raw JSON arguments.
KEY_NAME_WORDS = ("passwd", "password", "passphrase", "key", "secret", "token", "pass", "pwd")
