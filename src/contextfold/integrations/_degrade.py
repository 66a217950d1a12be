"""Graceful degradation in adapters: a compaction error never ends the user's run unless ``strict`` is set.

When preparing the view fails (``InsufficientBudget``, a summarizer that fails, a store that is down), the
adapter sends the smallest valid view it can build from the stored view (the oldest turns dropped with their tool
partners until it fits the hard threshold) and emits a ``compact.warning`` event with code ``adapter_degraded``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError, InvalidHistory
from ..recovery import drop_oldest
from ..telemetry import CompactWarning

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..messages import Message

__all__ = ["DEGRADED_CODE", "prepare_messages"]

DEGRADED_CODE = "adapter_degraded"


def prepare_messages(cm: ContextManager, *, strict: bool, where: str) -> list[Message]:
    """``cm.prepare_messages()``; on a compaction failure (unless ``strict``) the smallest valid view, warned."""
    try:
        return cm.prepare_messages()
    except (ConfigError, InvalidHistory):
        raise  # the caller's mistake, not the moment's: degrading would hide it
    except Exception as exc:
        if strict:
            raise
        view = drop_oldest(cm.messages(), cm.budgets.hard, cm.counter, cm.policy)
        cm.tracer.emit(CompactWarning(
            session_id=cm.session_id, code=DEGRADED_CODE,
            message=f"{where}: preparing the view failed ({type(exc).__name__}: {exc}); sending the smallest valid "
                    f"view instead ({len(view)} messages; pass strict=True to raise)"))
        return view
