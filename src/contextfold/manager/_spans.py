"""The span structure of a session, so that a trace reads as the work that was done.

A session is one trace (:class:`~contextfold.telemetry.SessionTrace`: named after the session, with the agent, model,
window and policy as metadata). Every model call is a root span ``prepare`` (kind ``llm.call``); inside it, the work
that changed the view is a child span with its real duration: ``compact.mask`` (kind ``cache``), ``compact.soft`` /
``compact.hard`` / ``compact.emergency`` (kind ``compact``) holding ``compact.summarize`` (kind ``summarize``: the
summarizer's latency and tokens) and ``compact.archive`` (kind ``archive``). Decisions, estimates, summaries and
prunings stay instant events under the span they happened in.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from ._collector import collector_released

if TYPE_CHECKING:  # (for types only: the manager imports this module when it is imported itself)
    from ..summarize import Summarizer, SummaryRequest, SummaryResult
    from ..telemetry import Tracer

__all__ = ["ARCHIVE_KIND", "CALL_KIND", "CALL_SPAN", "TracedSummarizer", "session_metadata"]

CALL_SPAN = "prepare"
CALL_KIND = "llm.call"
COMPACT_KIND = "compact"
MASK_KIND = "cache"
SUMMARIZE_KIND = "summarize"
ARCHIVE_KIND = "archive"


def session_metadata(*, agent: str | None, model: str, window: int, policy: Mapping[str, Any]) -> dict[str, Any]:
    """The session trace's metadata: who runs, on which model and window, under which thresholds."""
    return {"agent": agent or "contextfold", "model": model, "context_window": window,
            **{f"policy.{key}": value for key, value in policy.items()}}


class TracedSummarizer:
    """Wraps a summarizer so that every call is a ``compact.summarize`` span with its latency and tokens.

    The span is a child of the compaction that asked for the summary; the summarizer itself is unchanged. Unless
    ``local`` (the built-in extractive one, all CPU), the call may wait on the network for long: a compaction's
    pause of the cyclic collector is lifted for it (``_collector.collector_released``).
    """

    def __init__(self, inner: Summarizer, tracer: Tracer, *, local: bool = False) -> None:
        self.inner = inner
        self.tracer = tracer
        self.local = local

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize through the wrapped summarizer inside a span."""
        with self.tracer.span("compact.summarize", kind=SUMMARIZE_KIND, strategy=request.strategy,
                              input_messages=len(request.messages), max_tokens=request.max_tokens) as span:
            with nullcontext() if self.local else collector_released():
                result = self.inner.summarize(request)
            span.set(summarizer=result.summarizer, input_tokens=result.input_tokens,
                     output_tokens=result.output_tokens, summary_chars=len(result.summary),
                     retained_facts=len(result.retain), fell_back=result.fell_back)
            if result.fell_back:
                span.set(warnings=list(result.warnings))
            return result

    def __getattr__(self, name: str) -> Any:
        # Anything else a summarizer offers (a name, a close()) is the wrapped summarizer's.
        return getattr(self.inner, name)
