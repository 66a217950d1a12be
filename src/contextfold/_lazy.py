"""The one shape of contextfold's lazy registries: ``name -> ".module"`` resolved on first attribute access.

Every package ``__init__`` that re-exports names uses it, so importing a package costs nothing until a name is
used, and a name pulls in only the module that defines it (``from contextfold.compaction import Plan`` does not
build the pydantic ``Policy`` model; ``import contextfold`` imports no optional dependency).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from importlib import import_module
from typing import Any

__all__ = ["LazyModule", "lazy_exports"]


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


class LazyModule:
    """A module imported when one of its names is first read; each name read is then a plain attribute.

    For a module that must not be imported with its importer (``from contextfold import ContextManager`` loads the
    manager and nothing heavy) but is used on every turn: an ``import`` statement inside the function resolves its
    package through importlib's Python code on each call, ~3 us, and more on a masking turn's cold caches (issue 22:
    ~15 such imports a masking turn). A name is looked up in the module once, so a later change of the module's
    attribute (a test's monkeypatch) is not seen: use it for classes and functions that are not patched.

    Example::

        if TYPE_CHECKING:
            from ..telemetry import events as _events
        else:
            _events = LazyModule("..telemetry.events", __package__)
    """

    def __init__(self, name: str, package: str | None = None) -> None:
        """``name`` as ``import_module`` takes it (relative to ``package`` when it starts with a dot)."""
        self._module_name = name
        self._module_package = package

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_module_"):  # (read before __init__ set them: copy or pickle)
            raise AttributeError(attribute)
        value = getattr(import_module(self._module_name, self._module_package), attribute)
        setattr(self, attribute, value)  # (found in the instance's dict from now on: __getattr__ is not called again)
        return value
