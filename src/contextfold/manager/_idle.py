"""Idle-time compaction: a soft compaction computed on a worker thread while the agent waits for its model.

A part the :class:`~contextfold.manager.ContextManager` holds. It runs at most one job at a time and hands its
result back only while the view it was computed from is intact: new messages appended after it are fine (they are
kept after the compacted part), a rewritten view (masking, another compaction) makes the result worthless.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from ..compaction import CompactionResult
    from ..messages import Message
    from ..summarize import Summarizer, SummaryRequest, SummaryResult

__all__ = ["ForgettableSummarizer", "IdleCompactions", "IdleOutcome", "JobForgotten"]

# Background compactions of every manager of the process share these workers, started on first need (issue 22: a
# thread per manager left 402 threads behind 200 managers dropped without close()). A session never has more than
# one job at a time (a second compaction could only be computed from a view the first rewrites).
WORKERS = 2

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _shared_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            from concurrent.futures import ThreadPoolExecutor

            _executor = ThreadPoolExecutor(WORKERS, thread_name_prefix="contextfold-idle")
        return _executor


@dataclass(frozen=True, slots=True)
class IdleOutcome:
    """What a finished background compaction gave, for the view it was computed from.

    ``result`` is set when the compaction succeeded and its view is intact; ``error`` when it failed;
    ``discarded`` when the view changed meanwhile. ``snapshot`` is the view it compacted, ``tail`` the messages
    added after it.
    """

    result: CompactionResult | None = None
    error: Exception | None = None
    discarded: bool = False
    snapshot: tuple[Message, ...] = ()
    tail: tuple[Message, ...] = ()


class JobForgotten(RuntimeError):
    """A background compaction's summarizer not called: its job was forgotten (its view taken back by add())."""


class ForgettableSummarizer:
    """A background job's summarizer, not called once the job is forgotten.

    ``add()``'s rollback forgets a job its check started; one the shared executor had begun already could not be
    cancelled and ran on, its summarizer call (an LLM's, paid) included, for a result nobody takes. Forgotten before
    that call, the job ends there (:class:`JobForgotten`, a failed job nobody reads). A call already under way runs
    to its end (it cannot be taken back), but its summary is not handed on: the job ends as forgotten then too, so
    its future never holds a compaction of a view the history does not hold as if it were one.
    """

    def __init__(self, inner: Summarizer) -> None:
        self.inner = inner
        self.forgotten = threading.Event()

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """The wrapped summarizer's summary, unless the job was forgotten."""
        if self.forgotten.is_set():
            raise JobForgotten("the background compaction was forgotten before its summary was asked for")
        result = self.inner.summarize(request)
        if self.forgotten.is_set():
            raise JobForgotten("the background compaction was forgotten while its summary was being written")
        return result

    def __getattr__(self, name: str) -> Any:
        # Anything else a summarizer offers (its counter, a name) is the wrapped summarizer's.
        return getattr(self.inner, name)


class IdleCompactions:
    """At most one background compaction of one session's view, and the check that its result still applies."""

    def __init__(self) -> None:
        self._pending: tuple[int, list[Message], Future[CompactionResult]] | None = None
        self._summarizer: ForgettableSummarizer | None = None  # the pending job's, told when it is forgotten

    @property
    def pending(self) -> bool:
        """Whether a job was started and its outcome not taken yet."""
        return self._pending is not None

    def started_mark(self) -> object:
        """A mark of the job pending now, for :meth:`forget_started_since` (``add()``'s rollback)."""
        return self._pending

    def forget_started_since(self, mark: object) -> None:
        """Forget a job started after ``mark`` (cancelled if it has not begun): the view it compacts was taken back.

        Left pending, it kept the next check from starting its own (one job at a time), and the next ``prepare()``
        discarded it (the view's version moved): a background compaction was lost to a rolled-back ``add()``.
        """
        pending = self._pending
        if pending is not mark and pending is not None:
            self._pending = None
            pending[2].cancel()
            if self._summarizer is not None:  # (begun already: it stops before its summarizer's call)
                self._summarizer.forgotten.set()
                self._summarizer = None

    def start(self, snapshot: list[Message], version: int, job: Callable[[], CompactionResult],
              summarizer: ForgettableSummarizer | None = None) -> Future[CompactionResult]:
        """Run ``job`` (the compaction of ``snapshot``, the view at ``version``) on a shared worker thread.

        ``summarizer``: the job's, told when the job is forgotten (see :meth:`forget_started_since`).
        """
        future = _shared_executor().submit(job)
        self._pending = (version, snapshot, future)
        self._summarizer = summarizer
        return future

    def take(self, current: Sequence[Message], version: int) -> IdleOutcome | None:
        """The outcome of a finished job against the view now (``current`` at ``version``); None while none is."""
        from ..errors import ContextfoldError

        pending = self._pending
        if pending is None or not pending[2].done():
            return None
        self._pending = self._summarizer = None  # (the summarizer holds the job's whole view: not kept past it)
        started_at, snapshot, future = pending
        length = len(snapshot)
        intact = started_at == version and len(current) >= length and all(
            a is b for a, b in zip(current[:length], snapshot, strict=True))
        try:
            result = future.result()
        except ContextfoldError as exc:
            return IdleOutcome(error=exc)
        if not intact:
            return IdleOutcome(discarded=True)
        return IdleOutcome(result=result, snapshot=tuple(snapshot), tail=tuple(current[length:]))

    def shutdown(self) -> None:
        """Wait for this session's running job, if any (its outcome can still be taken); the workers stay shared."""
        pending = self._pending
        if pending is not None:
            from concurrent.futures import wait

            wait([pending[2]])
