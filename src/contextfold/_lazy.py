"""The one shape of contextfold's lazy registries: ``name -> ".module"`` resolved on first attribute access.

Every package ``__init__`` that re-exports names uses it, so importing a package costs nothing until a name is
used, and a name pulls in only the module that defines it (``from contextfold.compaction import Plan`` does not
build the pydantic ``Policy`` model; ``import contextfold`` imports no optional dependency).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: MutableMapping[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module-level ``__getattr__`` and ``__dir__`` for ``package`` that import ``exports[name]`` when asked.

    ``exports`` maps each public name to the module defining it, relative to ``package`` (``".policy"``); a
    resolved name is stored in ``namespace`` (the package's ``globals()``), so it is looked up only once.

    Example::

        __getattr__, __dir__ = lazy_exports(__name__, globals(), {"Policy": ".policy"})
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
