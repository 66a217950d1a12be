"""Compaction: the policy that decides, the classification, and the pure rebuild of a view that fits a budget.

Contract: :func:`decide` turns token and message counts into the cheapest :class:`Plan`; :func:`compact` (pure, no
I/O) partitions a history into units that never split a call from its result (``_partition``), fits keep counts
and a summary reserve to the budget, FACTs first (``_fit``, ``classification``), and assembles pinned messages, retained
facts, user requests, the summary and recent turns (``_rebuild``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._compact import CompactionKind, CompactionPlan, CompactionResult, CompactionStats, compact, plan_compaction
    from .classification import Category, classify, classify_all, reduction_rank
    from .policy import (
        DEFAULT_CLEAR_AT_LEAST,
        DEFAULT_HARD_CAP_BUFFER,
        DEFAULT_PROTECTED_TOOLS,
        DEFAULT_SOFT_PCT,
        DEFAULT_TRIGGER_PCT,
        DEFAULT_USER_MESSAGE_BUDGET,
        Action,
        Budgets,
        Plan,
        Policy,
        Strategy,
        decide,
    )

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "Action": ".policy",
    "Budgets": ".policy",
    "Category": ".classification",
    "CompactionKind": "._compact",
    "CompactionPlan": "._compact",
    "CompactionResult": "._compact",
    "CompactionStats": "._compact",
    "DEFAULT_CLEAR_AT_LEAST": ".policy",
    "DEFAULT_HARD_CAP_BUFFER": ".policy",
    "DEFAULT_PROTECTED_TOOLS": ".policy",
    "DEFAULT_SOFT_PCT": ".policy",
    "DEFAULT_TRIGGER_PCT": ".policy",
    "DEFAULT_USER_MESSAGE_BUDGET": ".policy",
    "Plan": ".policy",
    "Policy": ".policy",
    "Strategy": ".policy",
    "classify": ".classification",
    "classify_all": ".classification",
    "compact": "._compact",
    "decide": ".policy",
    "plan_compaction": "._compact",
    "reduction_rank": ".classification",
}
__all__ = [
    "DEFAULT_CLEAR_AT_LEAST", "DEFAULT_HARD_CAP_BUFFER", "DEFAULT_PROTECTED_TOOLS", "DEFAULT_SOFT_PCT",
    "DEFAULT_TRIGGER_PCT", "DEFAULT_USER_MESSAGE_BUDGET", "Action", "Budgets", "Category", "CompactionKind",
    "CompactionPlan", "CompactionResult", "CompactionStats", "Plan", "Policy", "Strategy", "classify", "classify_all",
    "compact", "decide", "plan_compaction", "reduction_rank",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
