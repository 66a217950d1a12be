"""A summarizer that answers from a script: for testing agents and compaction without a model."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable

from ..summarize.base import SummaryRequest, SummaryResult
from ..summarize.parse import parse_reply

__all__ = ["ScriptedSummarizer"]

ScriptedSummary = str | SummaryResult | BaseException
"""A scripted answer: reply text (parsed for ``<summary>``/``<retain>``), a ready result, or an error to raise."""


class ScriptedSummarizer:
    """Returns scripted summaries in order and records every request it was given.

    Args:
        replies: answers in order; a string is parsed like a model's reply, an exception is raised.
        handler: computes the answer from the request instead (used when the queue is empty).
        default: the answer once the script runs out; ``None`` raises ``LookupError`` instead, so a test notices
            an unexpected summary. The default says how many messages it covered, which keeps tests readable.

    Example:
        >>> from contextfold.messages import Message
        >>> s = ScriptedSummarizer(["<summary>fixed the bug</summary><retain>- use tabs</retain>"])
        >>> s.summarize(SummaryRequest((Message.user("hi"),))).retain
        ('use tabs',)
    """

    name = "scripted"

    def __init__(
        self,
        replies: Iterable[ScriptedSummary] = (),
        *,
        handler: Callable[[SummaryRequest], ScriptedSummary] | None = None,
        default: str | None = "Summary of {count} messages.",
    ) -> None:
        self._replies: deque[ScriptedSummary] = deque(replies)
        self._handler = handler
        self._default = default
        self._lock = threading.Lock()
        self.requests: list[SummaryRequest] = []

    def push(self, *replies: ScriptedSummary) -> None:
        """Append answers to the script."""
        with self._lock:
            self._replies.extend(replies)

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """The next scripted answer for ``request`` (recorded in :attr:`requests`)."""
        with self._lock:
            self.requests.append(request)
            reply: ScriptedSummary | None = self._replies.popleft() if self._replies else None
        if reply is None and self._handler is not None:
            reply = self._handler(request)
        if reply is None:
            if self._default is None:
                raise LookupError(f"ScriptedSummarizer: no scripted summary left for request {len(self.requests)}")
            reply = self._default.format(count=len(request.messages))
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, SummaryResult):
            return reply
        parsed = parse_reply(reply)
        return SummaryResult(summary=parsed.summary, retain=parsed.retain, summarizer=self.name)
