"""Context the agent can see and steer: its budget, its own compaction, superseded reads, per-tool policies.

Contract (each part pure over messages and policies; the manager holds the state in a :class:`Steering`):

- **Per-tool policies** (:mod:`.tool_policy`): ``policy.tools`` maps a tool name or glob to a :class:`ToolPolicy`
  (write-time ``max_tokens``, ``keep_whole``, ``never_mask``, ``mask_after_turns``, ``summarize``, ``protected``,
  ``resource``); :class:`ToolPolicies` resolves a name to a :class:`ResolvedToolPolicy`, every matching entry
  applied in order after the built-in ones.
- **Superseded reads** (:mod:`.resources`): :func:`superseded_reads` finds the reads that a later read of the same
  resource (same or wider range) or a later edit made stale; what a call reads is told by a :class:`ResourceRule`
  per tool (:mod:`.resource_rule`), with :data:`DEFAULT_RESOURCE_RULES` for the common file tools.
- **Masking order** (:mod:`.order`): :func:`mask_order` turns both into a :class:`MaskOrder` (outputs to mask
  first, outputs to leave) that :func:`contextfold.cache.masking.mask_tool_outputs` takes; when and how much to
  mask stays the manager's decision.
- **Notes the model reads** (:mod:`.notes`): the budget line (:func:`status_text`, sent last, outside the
  history, counted) and the compaction receipt (:func:`receipt_text`, right after the summary); both name only tools
  the agent has.
- **compact_context** (:mod:`.compact_tool`): the tool an agent calls to compact its own context (the same
  compaction as ``/compact``); :func:`run_compact_context` answers a call, untrusted arguments included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._state import Steering, schema_tool_names
    from .compact_tool import (
        COMPACT_CONTEXT_TOOL,
        MAX_INSTRUCTION_CHARS,
        MIN_MESSAGES_BETWEEN,
        compact_context_schema,
        compact_context_spec,
        compact_result_text,
        run_compact_context,
    )
    from .notes import (
        RECEIPT_KIND,
        STATUS_KIND,
        SinceLastTurn,
        insert_receipt,
        receipt_message,
        receipt_text,
        status_message,
        status_text,
        without_receipts,
    )
    from .order import MaskOrder, mask_order, turns_after
    from .resource_rule import ResourceRule
    from .resources import DEFAULT_RESOURCE_RULES, Access, access_of, superseded_reads
    from .tool_policy import ResolvedToolPolicy, ToolPolicies, ToolPolicy, parse_tool_policies

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "Access": ".resources",
    "COMPACT_CONTEXT_TOOL": ".compact_tool",
    "DEFAULT_RESOURCE_RULES": ".resources",
    "MAX_INSTRUCTION_CHARS": ".compact_tool",
    "MIN_MESSAGES_BETWEEN": ".compact_tool",
    "MaskOrder": ".order",
    "RECEIPT_KIND": ".notes",
    "ResolvedToolPolicy": ".tool_policy",
    "ResourceRule": ".resource_rule",
    "STATUS_KIND": ".notes",
    "SinceLastTurn": ".notes",
    "Steering": "._state",
    "ToolPolicies": ".tool_policy",
    "ToolPolicy": ".tool_policy",
    "access_of": ".resources",
    "compact_context_schema": ".compact_tool",
    "compact_context_spec": ".compact_tool",
    "compact_result_text": ".compact_tool",
    "insert_receipt": ".notes",
    "mask_order": ".order",
    "parse_tool_policies": ".tool_policy",
    "receipt_message": ".notes",
    "receipt_text": ".notes",
    "run_compact_context": ".compact_tool",
    "schema_tool_names": "._state",
    "status_message": ".notes",
    "status_text": ".notes",
    "superseded_reads": ".resources",
    "turns_after": ".order",
    "without_receipts": ".notes",
}
__all__ = [
    "COMPACT_CONTEXT_TOOL",
    "DEFAULT_RESOURCE_RULES",
    "MAX_INSTRUCTION_CHARS",
    "MIN_MESSAGES_BETWEEN",
    "RECEIPT_KIND",
    "STATUS_KIND",
    "Access",
    "MaskOrder",
    "ResolvedToolPolicy",
    "ResourceRule",
    "SinceLastTurn",
    "Steering",
    "ToolPolicies",
    "ToolPolicy",
    "access_of",
    "compact_context_schema",
    "compact_context_spec",
    "compact_result_text",
    "insert_receipt",
    "mask_order",
    "parse_tool_policies",
    "receipt_message",
    "receipt_text",
    "run_compact_context",
    "schema_tool_names",
    "status_message",
    "status_text",
    "superseded_reads",
    "turns_after",
    "without_receipts",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
