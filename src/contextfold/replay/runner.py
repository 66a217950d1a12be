"""Replay many sessions in parallel across cores, with a progress bar and a summary table.

Sessions go to worker processes as contextfold JSONL (messages hold read-only mappings, which do not pickle) and
come back as plain dicts; :func:`~contextfold.replay.metrics.aggregate` turns them into the replay JSON.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, TextIO

from ..importers._session import RecordedSession
from .harness import ReplayOptions, replay_session
from .metrics import aggregate, session_totals

__all__ = ["Progress", "default_jobs", "run_replay", "summary_table"]

# The progress bar's width in characters: fits an 80-column terminal with the counts beside it.
BAR_WIDTH = 30
# Within a session replayed in this process, the line is redrawn every this many turns.
TURN_STEP = 100
# Up to this many sessions the table lists each; beyond, one row per data source keeps it readable.
MAX_SESSION_ROWS = 12


def _start_method() -> str:
    """How worker processes start.

    "fork" is fast and, unlike "spawn", does not re-import the caller's ``__main__`` (a script without an
    ``if __name__ == "__main__"`` guard would otherwise crash the pool). But a fork copies locks held by other
    threads mid-operation, so when the parent runs threads (a telemetry processor, a store's pool) the workers
    start with "spawn" instead.
    """
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return "fork"
    return "spawn"


def default_jobs() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not every platform has sched_getaffinity
        return max(1, os.cpu_count() or 1)


class Progress:
    """A one-line progress bar on a stream, redrawn in place (carriage return); silent when disabled."""

    def __init__(self, total: int, stream: TextIO | None = None, *, enabled: bool | None = None) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = enabled if enabled is not None else bool(isatty and isatty())
        self.done = 0
        self.turns = 0
        self.failed = 0
        self._started = time.perf_counter()

    def update(self, result: dict[str, Any]) -> None:
        """Count one finished session and redraw."""
        self.done += 1
        self.turns += len(result.get("series", ()))
        self.failed += 1 if result.get("error") else 0
        if not self.enabled:
            return
        filled = BAR_WIDTH * self.done // max(1, self.total)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        elapsed = time.perf_counter() - self._started
        failed = f", {self.failed} failed" if self.failed else ""
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} sessions, {self.turns} turns{failed}, {elapsed:.0f}s")
        self.stream.flush()

    def turn(self, session_id: str, turns: int) -> None:
        """Redraw within a session replayed in this process: a session of 100,000 turns shows it is moving.

        Drawn every :data:`TURN_STEP` turns (and for the first), so the bar costs nothing per turn.
        """
        if not self.enabled or (turns != 1 and turns % TURN_STEP):
            return
        elapsed = time.perf_counter() - self._started
        self.stream.write(f"\r{self.done}/{self.total} sessions; {session_id}: {turns:,} turns, {elapsed:.0f}s")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled and self.done:
            self.stream.write("\n")
            self.stream.flush()


@dataclass(frozen=True, slots=True)
class _Task:
    """One session as it travels to a worker."""

    id: str
    source: str
    format: str
    messages: str


def _pack(session: RecordedSession) -> _Task:
    from ..serialize import dumps_messages

    return _Task(session.id, session.source, session.format, dumps_messages(session.messages))


def _failed(session_id: str, source: str, exc: BaseException) -> dict[str, Any]:
    return {
        "id": session_id, "source": source, "format": None, "messages": 0, "thresholds": None, "series": [],
        "totals": session_totals([]), "events": [], "events_omitted": 0, "summaries": [],
        "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(),
    }


def _replay_task(task: _Task, options: ReplayOptions) -> dict[str, Any]:
    """Worker entry point: rebuild the session and replay it; a crash becomes the session's ``error``."""
    from ..serialize import loads_messages

    try:
        session = RecordedSession(task.id, task.source, loads_messages(task.messages), task.format)  # type: ignore[arg-type]
        return replay_session(session, options)
    except Exception as exc:  # one broken session must not sink a 200-session run
        return _failed(task.id, task.source, exc)


def _turn_reporter(progress: Progress, session_id: str) -> Callable[[Any], None]:
    """A per-turn callback that shows the turns of ``session_id`` replayed so far on ``progress``."""
    counter = itertools.count(1)

    def on_turn(_metrics: Any) -> None:
        progress.turn(session_id, next(counter))

    return on_turn


def _run_here(sessions: Sequence[RecordedSession], options: ReplayOptions,
              done: Callable[[dict[str, Any]], None],
              progress: Progress | None = None) -> list[dict[str, Any]]:
    results = []
    for session in sessions:
        on_turn = _turn_reporter(progress, session.id) if progress is not None and progress.enabled else None
        try:
            result = replay_session(session, options, on_turn=on_turn)
        except Exception as exc:  # same contract as the workers
            result = _failed(session.id, session.source, exc)
        done(result)
        results.append(result)
    return results


def _run_pool(sessions: Sequence[RecordedSession], options: ReplayOptions, jobs: int,
              done: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    results: list[dict[str, Any] | None] = [None] * len(sessions)
    context = multiprocessing.get_context(_start_method())
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures: dict[Future[dict[str, Any]], int] = {
            pool.submit(_replay_task, _pack(s), options): i for i, s in enumerate(sessions)
        }
        try:
            for future in as_completed(futures):
                result = future.result()
                results[futures[future]] = result
                done(result)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return [r for r in results if r is not None]


def run_replay(
    sessions: Sequence[RecordedSession],
    options: ReplayOptions | None = None,
    *,
    jobs: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Replay every session (``jobs`` worker processes; 1 runs in this process) and return the replay JSON.

    Results keep the order of ``sessions`` whatever order the workers finish in.
    """
    options = options or ReplayOptions()
    workers = max(1, min(jobs or default_jobs(), len(sessions) or 1))

    def done(result: dict[str, Any]) -> None:
        if progress is not None:
            progress.update(result)

    try:
        results = (_run_here(sessions, options, done, progress) if workers == 1
                   else _run_pool(sessions, options, workers, done))
    finally:
        if progress is not None:
            progress.close()
    return aggregate(results, options.settings())


# -- the summary table ------------------------------------------------------------------------------------------------
_COLUMNS = (
    ("sessions", 8), ("turns", 6), ("valid", 7), ("needed", 7), ("recov.", 7), ("sent", 11), ("baseline", 11),
    ("saved", 6), ("cost $", 9), ("cached $", 9), ("compact", 7), ("mask", 5), ("ms p50", 7), ("ms p99", 7),
)
# Width of the first column (session id or data source); longer names push the figures right, never cut.
_NAME_WIDTH = 32


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _row(name: str, figures: dict[str, Any]) -> str:
    sent, baseline = figures["tokens_sent"], figures["tokens_sent_baseline"]
    saved = "-" if not baseline else f"{100 * (1 - sent / baseline):.0f}%"
    cells = [
        str(figures["sessions"]), str(figures["turns"]), _pct(figures["valid_rate"]),
        _pct(figures["needed_fact_recall"]), _pct(figures["recoverable_fact_recall"]), f"{sent:,}",
        f"{baseline:,}", saved, _money(figures["cost_usd"]), _money(figures["cost_usd_cached"]),
        str(figures["compactions"]), str(figures["maskings"]), _ms(figures["prepare_ms_median"]),
        _ms(figures["prepare_ms_p99"]),
    ]
    return f"{name:<{_NAME_WIDTH}} " + " ".join(f"{c:>{w}}" for c, (_, w) in zip(cells, _COLUMNS, strict=True))


def summary_table(result: dict[str, Any]) -> str:
    """The human-readable table of a replay: one row per session (or per data source for many), then the total."""
    per_session = result["per_session"]
    header = f"{'session' if len(per_session) <= MAX_SESSION_ROWS else 'source':<{_NAME_WIDTH}} " + " ".join(
        f"{title:>{w}}" for title, w in _COLUMNS
    )
    lines = [header]
    settings = {k: result.get(k) for k in ("model", "window", "format", "summarizer", "policy")}
    if len(per_session) <= MAX_SESSION_ROWS:
        groups = [(s["id"], [s]) for s in per_session]
    else:
        by_source: dict[str, list[dict[str, Any]]] = {}
        for s in per_session:
            by_source.setdefault(str(s["source"]), []).append(s)
        groups = sorted(by_source.items())
    for name, members in groups:
        lines.append(_row(name, aggregate(members, settings)))
    if len(groups) > 1:
        lines.append(_row(f"total ({len(per_session)} sessions)", result))
    for s in per_session:
        if s.get("error"):
            lines.append(f"failed: {s['id']}: {s['error']}")
    return "\n".join(lines) + "\n"
