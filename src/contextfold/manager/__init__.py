"""The runtime of one session: the :class:`ContextManager` and the parts it holds.

Contract: ``add`` → ``prepare`` → ``record_usage`` is the flow of a turn (``_manager``); the view is kept normalized
and counted incrementally (``_view``); compaction runs through the compactor (``_compactor``), components are built
from names or objects in one place (``_build``), and what a framework has fed the manager is recorded with it
(``reconcile``), so adapters keep no state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._build import CompactionReport, Status
    from ._manager import ContextManager

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "CompactionReport": "._build",
    "ContextManager": "._manager",
    "Status": "._build",
}
__all__ = [
    "CompactionReport", "ContextManager", "Status",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
