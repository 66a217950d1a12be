"""Summarizers: the protocol, strategies and prompts, reply parsing, the extractive default and the LLM summarizer.

``ExtractiveSummarizer`` is the embedded default (no model, deterministic); ``LLMSummarizer`` asks a
:class:`ChatProvider` (``provider``; built-in clients in :mod:`contextfold.providers`) and falls back to the
extractive one on any failure. Names load on first use: the LLM summarizer imports asyncio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .base import DEFAULT_SUMMARY_TOKENS, STRATEGIES, Summarizer, SummaryRequest, SummaryResult, default_counter
    from .entities import ENTITY_KINDS, extract_entities, extract_entities_by_kind
    from .extractive import ExtractiveSummarizer
    from .llm import LLMSummarizer, render_transcript
    from .parse import ParsedReply, parse_reply
    from .prompts import STRATEGY_PROMPTS, SYSTEM_PROMPT, build_prompt
    from .provider import ChatMessage, ChatProvider, Completion

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "ChatMessage": ".provider",
    "ChatProvider": ".provider",
    "Completion": ".provider",
    "DEFAULT_SUMMARY_TOKENS": ".base",
    "ENTITY_KINDS": ".entities",
    "ExtractiveSummarizer": ".extractive",
    "LLMSummarizer": ".llm",
    "ParsedReply": ".parse",
    "STRATEGIES": ".base",
    "STRATEGY_PROMPTS": ".prompts",
    "SYSTEM_PROMPT": ".prompts",
    "Summarizer": ".base",
    "SummaryRequest": ".base",
    "SummaryResult": ".base",
    "build_prompt": ".prompts",
    "default_counter": ".base",
    "extract_entities": ".entities",
    "extract_entities_by_kind": ".entities",
    "parse_reply": ".parse",
    "render_transcript": ".llm",
}
__all__ = [
    "DEFAULT_SUMMARY_TOKENS", "ENTITY_KINDS", "STRATEGIES", "STRATEGY_PROMPTS", "SYSTEM_PROMPT", "ChatMessage",
    "ChatProvider", "Completion", "ExtractiveSummarizer", "LLMSummarizer", "ParsedReply", "Summarizer",
    "SummaryRequest", "SummaryResult", "build_prompt", "default_counter", "extract_entities",
    "extract_entities_by_kind", "parse_reply", "render_transcript",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
