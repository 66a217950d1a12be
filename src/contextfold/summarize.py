"""Summarizers (interface stub: the summarize work fills in strategies and the extractive summarizer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .messages import Message

__all__ = ["Summarizer", "SummaryRequest", "SummaryResult"]


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What to summarize and how."""

    messages: tuple[Message, ...]
    previous_summary: str | None = None
    strategy: str = "task_state"
    instructions: str | None = None
    summary_directives: tuple[str, ...] = ()
    retain_directives: tuple[str, ...] = ()
    max_tokens: int = 2_000


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """A summary and the facts to keep verbatim."""

    summary: str
    retain: tuple[str, ...] = ()
    summarizer: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    fell_back: bool = False
    warnings: tuple[str, ...] = ()


@runtime_checkable
class Summarizer(Protocol):
    """Turns a slice of history into a summary. One method; implement it to plug in any model."""

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request.messages`` (folding in ``request.previous_summary``)."""
        ...
