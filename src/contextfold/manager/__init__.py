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
    from .reconcile import (
        DIVERGED_CODE,
        REPLACED_REASON,
        FrameworkHistory,
        Reconciled,
        content_key,
        pin_head,
        rebase,
        reconcile,
        unpinned,
    )

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "CompactionReport": "._build",
    "ContextManager": "._manager",
    "DIVERGED_CODE": ".reconcile",
    "FrameworkHistory": ".reconcile",
    "REPLACED_REASON": ".reconcile",
    "Reconciled": ".reconcile",
    "Status": "._build",
    "content_key": ".reconcile",
    "pin_head": ".reconcile",
    "rebase": ".reconcile",
    "reconcile": ".reconcile",
    "unpinned": ".reconcile",
}
__all__ = [
    "DIVERGED_CODE", "REPLACED_REASON", "CompactionReport", "ContextManager", "FrameworkHistory", "Reconciled",
    "Status", "content_key", "pin_head", "rebase", "reconcile", "unpinned",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
