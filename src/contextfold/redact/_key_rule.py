"""The key rule: a mapping key that names a secret makes its whole string value one, whatever the value looks like.

``{"db_pass": "…"}`` in a message's meta or a tool call's decoded arguments: :data:`~.rules.SECRET_KEY` reads the
key, :func:`~.rules.weak_value_ok` the value under a weak key (``key``, ``token``), and the value is learned and
replaced by its marker. The patterns play no part, so the rule holds whatever patterns a redactor has
(``builtin=False`` included): :func:`key_rule_triggers` gives the bulk prefilter the key words no pattern's trigger
covers. :func:`redact_item` is :meth:`Redactor._redact_item <._redactor.Redactor>` (bound there as a method): what
``redact_obj`` does with each item of a mapping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .._exact import exact_key
from ..messages import kept_value_type, value_text
from ._gate import KEY_NAME_WORDS
from ._scans import marker

__all__ = ["key_rule_triggers", "key_says", "redact_item"]


class _Host(Protocol):
    """What :func:`redact_item` uses of its redactor."""

    def learn(self, secret: str, name: str) -> None: ...
    def redact_text(self, text: str) -> str: ...
    def redact_obj(self, obj: Any) -> Any: ...


# What the key rule says of a mapping key: (the secret's kind, the weak key matched or None), None for a key that
# names no secret. Keys repeat (every message's meta has the same few): asked once each, up to this many.
_KEY_SAYS: dict[str, tuple[str, str | None] | None] = {}
_KEY_SAYS_MAX = 4096
# A key this long at most is kept in _KEY_SAYS (a key is a name: a longer one is asked again, not kept).
_KEY_KEPT_MAX_CHARS = 256


def key_rule_triggers(triggers: Sequence[str]) -> tuple[str, ...]:
    """The key rule's words no trigger of ``triggers`` is part of, shortest first (``pass`` covers ``password``)."""
    added: list[str] = []
    for word in sorted(KEY_NAME_WORDS, key=len):
        if not any(t in word for t in (*triggers, *added)):
            added.append(word)
    return tuple(added)


def key_says(key: str) -> tuple[str, str | None] | None:
    """What :data:`~contextfold.redact.rules.SECRET_KEY` says of ``key`` (see ``Redactor._redact_item``)."""
    try:
        return _KEY_SAYS[key]
    except KeyError:
        pass
    from .rules import SECRET_KEY

    m = SECRET_KEY.fullmatch(key)
    says = None if m is None else ("password" if m.group("pw") or m.group("wpw") else "api_key", m.group("weak"))
    if len(key) <= _KEY_KEPT_MAX_CHARS:  # (a key is a name: a long one is asked again, not kept)
        if len(_KEY_SAYS) >= _KEY_SAYS_MAX:
            _KEY_SAYS.clear()
        _KEY_SAYS[key] = says
    return says


def redact_item(redactor: _Host, key: Any, value: Any) -> Any:
    kind = type(value)
    if kind is int or kind is float or kind is bool or value is None:
        return value  # (a figure: what redact_obj returns for it, without the checks below)
    # A str of a subclass (key or value) is read as its exact value, by its type: its own methods (a ``startswith``
    # saying it was redacted already, a ``__class__`` claiming str) never decide (see contextfold._exact).
    if type(value) is not str and issubclass(type(value), str):
        value = str.__str__(value)
    if type(key) is not str:
        key = exact_key(key)
    # {"password": "..."}: the key says the whole value is a secret, whatever it looks like.
    if type(value) is not str and type(key) is str and kept_value_type(type(value)):
        # (A UUID or a Decimal a message keeps as itself: its text is what a transcript writes, so the key rule
        # reads that text, learned and replaced as a string would be; no pattern matches a bare UUID.)
        text = value_text(value)
        redacted = redact_item(redactor, key, text)
        return value if redacted == text else redacted
    if type(value) is str and type(key) is str and not value.startswith("[REDACTED"):
        says = key_says(key)
        if says is not None:
            from .rules import is_placeholder, weak_value_ok

            name, weak = says
            if not is_placeholder(value, maybe_tag=False) and (weak is None or weak_value_ok(weak, value)):
                redactor.learn(value, name)
                return marker(name)
        return redactor.redact_text(value)
    return redactor.redact_obj(value)
