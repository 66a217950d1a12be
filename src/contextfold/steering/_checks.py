"""Checks of the per-tool settings (:class:`~.tool_policy.ToolPolicy`, :class:`~.resource_rule.ResourceRule`).

Plain Python, not pydantic: the built-in resource rules are built by every default manager, and pydantic's import
was most of a process's first ``ContextManager(...)`` (issue 22). The wording follows pydantic's, which validates the
rest of the configuration (``Input should be greater than 0``), so a config error reads the same wherever it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["SettingError", "check_known", "flag", "names", "whole_number"]


class SettingError(ValueError):
    """A per-tool setting that is not valid: ``path`` names it (``max_tokens``, ``resource.key``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def within(self, outer: str) -> SettingError:
        """The same problem, its path inside ``outer`` (``resource`` -> ``resource.key``)."""
        return SettingError(f"{outer}.{self.path}", self.problem)


def check_known(fields: Mapping[str, Any], known: tuple[str, ...]) -> None:
    """Refuse a key that names no setting (a typo must not be ignored)."""
    for name in fields:
        if name not in known:
            raise SettingError(str(name), "unknown setting")


def names(path: str, value: object) -> tuple[str, ...]:
    """Argument names: one name (``"path"`` in a config file means ``("path",)``) or a list of them."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SettingError(path, "Input should be a name or a list of names")


# What pydantic's lax mode takes for a boolean (a settings file or an environment variable may say "yes").
_TRUE = frozenset({"true", "yes", "on", "y", "t", "1"})
_FALSE = frozenset({"false", "no", "off", "n", "f", "0"})
# A whole number as text: ASCII digits only (str.isdigit() takes "²" and "٣"), and few enough of them that int()
# neither refuses the string nor spends time on it (a million tokens has 7).
_WHOLE_NUMBER_TEXT = re.compile(r"[+-]?[0-9]{1,18}")


def flag(path: str, value: object) -> bool | None:
    """An optional true/false setting (``"yes"``, ``"off"``, 1 and 0 read as pydantic reads them)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise SettingError(path, "Input should be a valid boolean")


def whole_number(path: str, value: object, *, least: int) -> int | None:
    """An optional whole number of at least ``least`` (``4000.0`` and ``"4000"`` read as 4000, as pydantic does)."""
    if value is None:
        return None
    number: int
    if isinstance(value, bool):
        raise SettingError(path, "Input should be a valid integer")
    if isinstance(value, int):
        number = int(value)  # (an int subclass, an IntEnum: stored as the plain number)
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _WHOLE_NUMBER_TEXT.fullmatch(value.strip()):
        number = int(value.strip())
    else:
        raise SettingError(path, "Input should be a valid integer")
    if number < least:
        raise SettingError(path, f"Input should be greater than {least - 1}" if least > 0
                           else f"Input should be greater than or equal to {least}")
    return number
