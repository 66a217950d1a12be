"""What a provider says it cleared or compacted in one reply, read from the reply and its usage.

Anthropic reports context editing in ``context_management.applied_edits`` (each with ``cleared_input_tokens`` and
``cleared_tool_uses`` or ``cleared_thinking_turns``), a server-side compaction as a ``compaction`` block in the
content and a ``compaction`` entry in ``usage.iterations`` (the tokens of the summarizing call, which are not in the
top-level usage), and ``stop_reason: "compaction"`` when it paused after compacting. The context the model read is
the last ``message`` iteration's input (``usage.iterations`` says not to derive it from a compaction entry).
OpenAI's Responses API reports a compaction as a ``compaction`` output item; its usage has no breakdown of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ProviderReport", "ProviderTotals", "as_dict", "read_anthropic", "read_openai"]


@dataclass(frozen=True, slots=True)
class ProviderReport:
    """One reply's account of the provider's own context management.

    Attributes:
        api: ``"anthropic"`` or ``"openai_responses"``.
        cleared_tool_uses: Tool uses the provider cleared before the model read the request.
        cleared_thinking_turns: Thinking turns it cleared.
        cleared_input_tokens: Input tokens those edits removed.
        compactions: Compaction items or blocks in the reply.
        compaction_input_tokens, compaction_output_tokens: What the summarizing call itself used (Anthropic).
        context_tokens: Input tokens of the request as the model read it, after edits and compaction.
        paused: The reply stopped after compacting (``pause_after_compaction``): call again to continue.
    """

    api: str
    cleared_tool_uses: int = 0
    cleared_thinking_turns: int = 0
    cleared_input_tokens: int = 0
    compactions: int = 0
    compaction_input_tokens: int = 0
    compaction_output_tokens: int = 0
    context_tokens: int | None = None
    paused: bool = False

    @property
    def acted(self) -> bool:
        """Whether the provider cleared or compacted anything for this reply."""
        return bool(self.cleared_tool_uses or self.cleared_thinking_turns or self.cleared_input_tokens
                    or self.compactions)


@dataclass(slots=True)
class ProviderTotals:
    """A session's running totals of :class:`ProviderReport` (what the bench and ``status`` show)."""

    replies: int = 0
    cleared_tool_uses: int = 0
    cleared_thinking_turns: int = 0
    cleared_input_tokens: int = 0
    compactions: int = 0
    compaction_input_tokens: int = 0
    compaction_output_tokens: int = 0

    def add(self, report: ProviderReport) -> None:
        """Count one reply."""
        self.replies += 1
        self.cleared_tool_uses += report.cleared_tool_uses
        self.cleared_thinking_turns += report.cleared_thinking_turns
        self.cleared_input_tokens += report.cleared_input_tokens
        self.compactions += report.compactions
        self.compaction_input_tokens += report.compaction_input_tokens
        self.compaction_output_tokens += report.compaction_output_tokens


def as_dict(obj: Any) -> dict[str, Any]:
    """An SDK reply (pydantic) or a mapping as a plain dict."""
    if isinstance(obj, Mapping):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, dict):
            return dumped
    return {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _items(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()


def read_anthropic(reply: Any) -> ProviderReport:
    """The :class:`ProviderReport` of an Anthropic Messages reply (a ``BetaMessage`` or its dict)."""
    body = as_dict(reply)
    tool_uses = thinking_turns = cleared = 0
    management = body.get("context_management")
    for edit in _items(management.get("applied_edits") if isinstance(management, Mapping) else None):
        if isinstance(edit, Mapping):
            tool_uses += _int(edit.get("cleared_tool_uses"))
            thinking_turns += _int(edit.get("cleared_thinking_turns"))
            cleared += _int(edit.get("cleared_input_tokens"))
    compactions = sum(1 for b in _items(body.get("content"))
                      if isinstance(b, Mapping) and b.get("type") == "compaction")
    usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
    assert isinstance(usage, Mapping)
    c_in = c_out = 0
    context: int | None = None
    for entry in _items(usage.get("iterations")):
        if not isinstance(entry, Mapping):
            continue
        tokens = (_int(entry.get("input_tokens")) + _int(entry.get("cache_read_input_tokens"))
                  + _int(entry.get("cache_creation_input_tokens")))
        if entry.get("type") == "compaction":
            c_in += tokens
            c_out += _int(entry.get("output_tokens"))
        elif entry.get("type") == "message":
            context = tokens  # the last message iteration is the context the reply was sampled from
    if context is None and usage:
        context = (_int(usage.get("input_tokens")) + _int(usage.get("cache_read_input_tokens"))
                   + _int(usage.get("cache_creation_input_tokens")))
    return ProviderReport("anthropic", tool_uses, thinking_turns, cleared, compactions, c_in, c_out, context,
                          body.get("stop_reason") == "compaction")


def read_openai(response: Any) -> ProviderReport:
    """The :class:`ProviderReport` of an OpenAI Responses reply (a ``Response`` or its dict)."""
    body = as_dict(response)
    compactions = sum(1 for item in _items(body.get("output"))
                      if isinstance(item, Mapping) and item.get("type") == "compaction")
    usage = body.get("usage")
    context = _int(usage.get("input_tokens")) if isinstance(usage, Mapping) else None
    return ProviderReport("openai_responses", compactions=compactions, context_tokens=context)
