"""The policy's decision, made again only when something it reads changed (issue 22, eighteenth session, lane N).

``decide()`` reads the view's figures (grounded total, message count, maskable tool-output tokens), the budgets and
the policy in force, nothing else: the same five give the same plan. A check point (``add()`` of tool results checks)
and the ``prepare()`` after it, or two calls on one view, decided twice on the same figures (~8 us each: the figures'
dict, the reason's text, the frozen plan). The plan is frozen, so the one made is handed out again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import LazyModule

if TYPE_CHECKING:
    from .. import compaction as _compaction
    from ..compaction import Budgets, Plan, Policy
else:  # (imported when first used, then no import statement per call)
    _compaction = LazyModule("..compaction", __package__)

__all__ = ["Decisions"]


class Decisions:
    """``compaction.decide`` with its last answer kept for the same figures, budgets and policy (by identity)."""

    __slots__ = ("_budgets", "_figures", "_plan", "_policy")

    def __init__(self) -> None:
        self._figures: tuple[int, int, int] | None = None
        self._budgets: Budgets | None = None
        self._policy: Policy | None = None
        self._plan: Plan | None = None

    def decide(self, total: int, count: int, tool_tokens: int, budgets: Budgets, policy: Policy) -> Plan:
        """``decide(total, count, tool_tokens, budgets, policy)``: the plan made last when these were its inputs."""
        plan = self._plan
        if (plan is not None and budgets is self._budgets and policy is self._policy
                and self._figures == (total, count, tool_tokens)):
            return plan
        plan = _compaction.decide(total, count, tool_tokens, budgets, policy)
        self._figures, self._budgets, self._policy, self._plan = (total, count, tool_tokens), budgets, policy, plan
        return plan
