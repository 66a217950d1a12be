"""A string or number of a subclass read as its exact type: what redaction reads is what a writer writes.

JSON writes a ``str``, ``int`` or ``float`` of a subclass as its value, but everything else a subclass may redefine:
its ``__str__``/``__format__`` (what a sink that prints or formats writes), its ``__eq__``/``__ne__``/``__hash__``
(what redaction compared to tell whether it changed anything), ``__contains__``, ``startswith``... A subclass whose
``__ne__`` lied passed the archive in clear; one whose ``__class__`` property claimed ``str`` fooled ``isinstance``
and made redaction raise (its event dropped). So both telemetry and the redactor read such a value as its exact
type first, by ``type()`` (never ``isinstance``), with the base type's own methods (never the subclass's): one
answer for both paths (eighteenth stop, lane S). A leaf: telemetry and redaction import it, it imports neither.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EXACT_LEAVES", "exact_key", "exact_leaf", "exact_text", "exact_values"]

# What an event's values are written as, exactly: a subclass of one is written as its value.
EXACT_LEAVES: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def exact_leaf(value: Any) -> Any:
    """``value`` as its exact type when it is a ``str``, ``int`` or ``float`` of a subclass, else ``value``.

    Read by its type, not ``isinstance``: an object's ``__class__`` property can claim ``int``, and ``int.__int__``
    then raised (reviewer 4, seventeenth stop). ``bool`` has no subclasses.
    """
    kind = type(value)
    if kind in EXACT_LEAVES:
        return value
    if issubclass(kind, str):
        return str.__str__(value)  # (a copy of its value, its own methods never called)
    if issubclass(kind, int):
        return int.__int__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    return value


def exact_text(text: str) -> str:
    """``text`` as an exact ``str`` (a subclass's value copied); an object merely claiming ``str`` as its ``str()``.

    The second is a caller's object handed where text was expected (its ``__class__`` says ``str``): what a writer
    makes of it is its text (``json``'s ``default=str``), so that is what is read, and what the caller then holds.
    """
    kind = type(text)
    if kind is str:
        return text
    if issubclass(kind, str):
        return str.__str__(text)
    try:
        shown = str(text)
    except Exception:  # (named by its type, as a transcript names a value whose text fails: messages.value_text)
        return f"<{kind.__name__}>"
    return shown if type(shown) is str else str.__str__(shown)


def exact_values(value: Any) -> Any:
    """``value`` with every ``str``, ``int`` and ``float`` of a subclass in it turned into its exact type.

    Made its exact type before redaction, it writes its value whatever the sink does: the same figures, the same
    JSON. Containers (dict, list, tuple) are copied only when they hold one; other objects are left to redaction.
    """
    kind = type(value)
    if kind in EXACT_LEAVES:
        return value
    if kind is list or kind is tuple:
        if EXACT_LEAVES.issuperset(map(type, value)):  # (C loops: an event's 100,000 ids, ~3% of their redaction)
            return value
        return kind(map(exact_values, value))
    if kind is dict:
        if EXACT_LEAVES.issuperset(map(type, value.values())) and EXACT_LEAVES.issuperset(map(type, value)):
            return value
        return {exact_key(k): exact_values(v) for k, v in value.items()}
    return exact_leaf(value)


def exact_key(key: Any) -> Any:
    """A mapping key: a ``str`` of a subclass as its exact value, any other key as it is."""
    return key if type(key) is str or not issubclass(type(key), str) else str.__str__(key)
