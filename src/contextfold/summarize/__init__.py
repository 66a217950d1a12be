"""Summarizers: the protocol, strategies and prompts, reply parsing, the extractive default and the LLM summarizer.

``ExtractiveSummarizer`` is the embedded default (no model, deterministic); ``LLMSummarizer`` asks a
:class:`contextfold.providers.ChatProvider` and falls back to the extractive one on any failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import DEFAULT_SUMMARY_TOKENS, STRATEGIES, Summarizer, SummaryRequest, SummaryResult, default_counter
from .entities import ENTITY_KINDS, extract_entities, extract_entities_by_kind
from .extractive import ExtractiveSummarizer
from .parse import ParsedReply, parse_reply
from .prompts import STRATEGY_PROMPTS, SYSTEM_PROMPT, build_prompt

__all__ = [
    "DEFAULT_SUMMARY_TOKENS",
    "ENTITY_KINDS",
    "STRATEGIES",
    "STRATEGY_PROMPTS",
    "SYSTEM_PROMPT",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "ParsedReply",
    "ScriptedSummarizer",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "build_prompt",
    "default_counter",
    "extract_entities",
    "extract_entities_by_kind",
    "parse_reply",
    "render_transcript",
]


if TYPE_CHECKING:
    from .llm import LLMSummarizer, render_transcript


def __getattr__(name: str) -> object:
    # The LLM summarizer imports asyncio (a fifth of `import contextfold`'s time): loaded when first named.
    if name in ("LLMSummarizer", "render_transcript"):
        from . import llm

        return getattr(llm, name)
    # The scripted test double lives with the other shipped doubles; re-exported here as the contract names it.
    if name == "ScriptedSummarizer":
        from ..testing.summarizer import ScriptedSummarizer

        return ScriptedSummarizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
