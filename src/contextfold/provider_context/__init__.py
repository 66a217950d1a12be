"""Working with the providers' own context management: compaction items, context editing, reasoning.

Contract:

- **Provider state is carried, never rewritten.** A signed thinking block, a redacted one, an encrypted reasoning
  item, a compaction item or block (:func:`contextfold.messages.is_opaque`) goes back to its provider byte for
  byte, is counted, and is never truncated, masked, summarized or redacted; converting a history to a format that
  cannot read it drops it (``formats/opaque.py``), and the manager reports that with a ``provider.item_dropped``
  event. It stays inside the assistant turn it came with.
- **A provider compaction item is a visibility boundary** (:mod:`.boundary`). When one arrives (``add()``), what
  it replaced leaves the view (archived first; the standing prompt stays), and contextfold's own compaction works
  only on what follows it: it never summarizes across it.
- **Who compacts** is ``Policy.compactor`` (:mod:`.orchestration`): ``contextfold`` (the default), ``provider``
  or ``both``. :class:`ProviderContext` (``cm.provider_context``) gives callers the request settings
  (:mod:`.settings`, sized from the policy), reads what the provider cleared and compacted from each reply
  (:mod:`.report`), and tells the manager what it may still do itself.
- **Old reasoning** (:mod:`.reasoning`): ``Policy.keep_thinking_turns`` clears the thinking of earlier turns, the
  turn in a tool loop always kept whole.

Pure except :class:`ProviderContext`, which emits events through the session's tracer. No SDK is imported: the
client wrappers and adapters (``contextfold.integrations``) send the settings and hand the replies over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .boundary import (
        BOUNDARY_KIND,
        boundary_index,
        drop_before_boundary,
        is_boundary,
        is_boundary_part,
        mark,
        split_at_boundary,
    )
    from .orchestration import API, Compactor, ProviderContext
    from .reasoning import ClearedReasoning, clear_old_reasoning, reasoning_turns
    from .report import ProviderReport, ProviderTotals, read_anthropic, read_openai
    from .settings import (
        ANTHROPIC_COMPACT_BETA,
        ANTHROPIC_CONTEXT_BETA,
        ANTHROPIC_MIN_COMPACT_TRIGGER,
        RequestSettings,
        anthropic_settings,
        openai_settings,
        thinking_enabled,
    )

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "ANTHROPIC_COMPACT_BETA": ".settings",
    "ANTHROPIC_CONTEXT_BETA": ".settings",
    "ANTHROPIC_MIN_COMPACT_TRIGGER": ".settings",
    "API": ".orchestration",
    "BOUNDARY_KIND": ".boundary",
    "ClearedReasoning": ".reasoning",
    "Compactor": ".orchestration",
    "ProviderContext": ".orchestration",
    "ProviderReport": ".report",
    "ProviderTotals": ".report",
    "RequestSettings": ".settings",
    "anthropic_settings": ".settings",
    "boundary_index": ".boundary",
    "clear_old_reasoning": ".reasoning",
    "drop_before_boundary": ".boundary",
    "is_boundary": ".boundary",
    "is_boundary_part": ".boundary",
    "mark": ".boundary",
    "openai_settings": ".settings",
    "read_anthropic": ".report",
    "read_openai": ".report",
    "reasoning_turns": ".reasoning",
    "split_at_boundary": ".boundary",
    "thinking_enabled": ".settings",
}
__all__ = [
    "ANTHROPIC_COMPACT_BETA", "ANTHROPIC_CONTEXT_BETA", "ANTHROPIC_MIN_COMPACT_TRIGGER", "API", "BOUNDARY_KIND",
    "ClearedReasoning", "Compactor", "ProviderContext", "ProviderReport", "ProviderTotals", "RequestSettings",
    "anthropic_settings", "boundary_index", "clear_old_reasoning", "drop_before_boundary", "is_boundary",
    "is_boundary_part", "mark", "openai_settings", "read_anthropic", "read_openai", "reasoning_turns",
    "split_at_boundary", "thinking_enabled",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
