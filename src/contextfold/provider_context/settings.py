"""The request settings that ask a provider to manage the context, sized from contextfold's own policy.

Anthropic's Messages API (beta ``context-management-2025-06-27``) takes ``context_management: {"edits": [...]}``:
``clear_thinking_20251015`` (``keep`` thinking turns, or ``"all"``), ``clear_tool_uses_20250919`` (``trigger``,
``keep``, ``clear_at_least``, ``exclude_tools``, ``clear_tool_inputs``) and, with beta ``compact-2026-01-12``,
``compact_20260112`` (``trigger`` of at least 50,000 input tokens, ``instructions``, ``pause_after_compaction``).
When several edits go together ``clear_thinking_20251015`` comes first. OpenAI's Responses API takes
``context_management: [{"type": "compaction", "compact_threshold": N}]``. (Shapes: ``anthropic`` 2.14 types
``BetaContextManagementConfigParam`` and its edits, ``openai`` 3.57 ``response_create_params.ContextManagement``;
sources in DESIGN.md.)

How the policy sizes them: the provider clears old tool results where contextfold would start masking (the soft
threshold), keeps ``keep_tool_io_pairs`` tool uses, clears at least ``clear_at_least`` tokens at a time (the prompt
cache is lost at the first cleared block, so small clearings do not pay), never clears ``exclude_tools`` nor the
``protected_tools``, and compacts at the hard threshold. Thinking turns are kept as ``keep_thinking_turns`` says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..compaction import Budgets, Policy

__all__ = [
    "ANTHROPIC_COMPACT_BETA",
    "ANTHROPIC_CONTEXT_BETA",
    "ANTHROPIC_MIN_COMPACT_TRIGGER",
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "COMPACT",
    "OPENAI_COMPACTION",
    "RequestSettings",
    "anthropic_settings",
    "openai_settings",
    "thinking_enabled",
]

ANTHROPIC_CONTEXT_BETA = "context-management-2025-06-27"
ANTHROPIC_COMPACT_BETA = "compact-2026-01-12"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
COMPACT = "compact_20260112"
OPENAI_COMPACTION = "compaction"
# Anthropic's documented floor for the compaction trigger: a window whose hard threshold sits lower cannot have the
# provider compact, and contextfold's own compaction stays the one that acts there.
ANTHROPIC_MIN_COMPACT_TRIGGER = 50_000
# Thinking configurations under which the model writes thinking blocks (``disabled`` and ``between_tools`` do not).
_THINKING_ON = frozenset({"enabled", "adaptive"})


@dataclass(frozen=True, slots=True)
class RequestSettings:
    """What to add to one request: keyword arguments (``context_management``) and the betas they need.

    ``compacts`` says whether the provider was asked to compact (not only to clear).
    """

    api: str
    params: Mapping[str, Any]
    betas: tuple[str, ...] = ()
    compacts: bool = False
    edits: tuple[str, ...] = field(default_factory=tuple)

    def apply(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """``kwargs`` with these settings added; the caller's own ``context_management`` wins, betas are merged."""
        out = dict(kwargs)
        for key, value in self.params.items():
            out.setdefault(key, value)
        if self.betas:
            given = out.get("betas") or ()
            out["betas"] = [*given, *(b for b in self.betas if b not in given)]
        return out


def thinking_enabled(thinking: Any) -> bool:
    """Whether an Anthropic ``thinking`` request parameter turns thinking blocks on."""
    kind = thinking.get("type") if isinstance(thinking, Mapping) else getattr(thinking, "type", None)
    return kind in _THINKING_ON


def _tokens(value: int) -> dict[str, Any]:
    return {"type": "input_tokens", "value": value}


def anthropic_settings(policy: Policy, budgets: Budgets, *, thinking: bool = False) -> RequestSettings:
    """Anthropic's ``context_management`` for ``policy`` at ``budgets`` (``thinking``: the request thinks)."""
    edits: list[dict[str, Any]] = []
    if thinking:
        keep = policy.keep_thinking_turns
        edits.append({"type": CLEAR_THINKING,
                      "keep": "all" if keep == "all" else {"type": "thinking_turns", "value": max(1, int(keep))}})
    clear: dict[str, Any] = {"type": CLEAR_TOOL_USES, "trigger": _tokens(budgets.soft),
                             "keep": {"type": "tool_uses", "value": policy.keep_tool_io_pairs}}
    if policy.clear_at_least > 0:
        clear["clear_at_least"] = _tokens(policy.clear_at_least)
    excluded = sorted({*policy.exclude_tools, *policy.protected_tools})
    if excluded:
        clear["exclude_tools"] = excluded
    if policy.clear_tool_inputs:
        clear["clear_tool_inputs"] = True
    edits.append(clear)
    betas = [ANTHROPIC_CONTEXT_BETA]
    compacts = budgets.hard >= ANTHROPIC_MIN_COMPACT_TRIGGER
    if compacts:
        compact: dict[str, Any] = {"type": COMPACT, "trigger": _tokens(budgets.hard)}
        if policy.provider_compaction_instructions is not None:
            compact["instructions"] = policy.provider_compaction_instructions
        if policy.provider_pause_after_compaction:
            compact["pause_after_compaction"] = True
        edits.append(compact)
        betas.append(ANTHROPIC_COMPACT_BETA)
    return RequestSettings("anthropic", {"context_management": {"edits": edits}}, tuple(betas), compacts,
                           tuple(e["type"] for e in edits))


def openai_settings(policy: Policy, budgets: Budgets) -> RequestSettings:
    """OpenAI Responses' ``context_management``: compact at the hard threshold."""
    del policy  # the threshold is all the Responses API takes
    entry = {"type": OPENAI_COMPACTION, "compact_threshold": budgets.hard}
    return RequestSettings("openai_responses", {"context_management": [entry]}, (), True, (OPENAI_COMPACTION,))

