"""What the read-ahead's step benchmarks share: the recorded agent loop, thread CPU timers around a function, best-of.

``bench_read_ahead_parts.py``, ``bench_light_digest_steps.py`` and ``bench_digest_steps.py`` each replayed the lm32b
sessions turn by turn and wrapped functions with thread CPU timers of their own; one copy of each lives here.
"""

from __future__ import annotations

import functools
import gc
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories" / "sweagent-lm32b"


def replay_loop(data: Path, sessions: int, *, session_prefix: str, policy: dict[str, Any] | None = None,
                window: int = 16_000, on_session: Callable[[Any], None] | None = None,
                on_added: Callable[[Any, Any], None] | None = None,
                on_turn: Callable[[Any], None] | None = None,
                on_end: Callable[[Any], None] | None = None, collect: bool = False) -> None:
    """The first ``sessions`` recorded sessions by id, played as an agent runs them (``bench_agent_loop.py``'s loop).

    Each session's messages before an assistant turn are added, ``prepare()`` is called, the background thread is
    given the model call's time (``_background.wait_idle()``), then the answer is added. The hooks see the manager:
    ``on_session`` when it is made, ``on_added(manager, message)`` before each message is added, ``on_turn`` after
    each model call's wait, ``on_end`` before it is closed. ``collect``: a full garbage collection before each
    ``prepare()``, as ``bench_agent_loop.py`` does (the read-ahead then runs with the caches as cold as there).
    """
    from contextfold import _background
    from contextfold.importers import load_sessions
    from contextfold.manager import ContextManager

    for n, recorded in enumerate(sorted(load_sessions(data), key=lambda s: s.id)[:sessions]):
        cm = ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive="memory",
                            session_id=f"{session_prefix}-{n}", policy=policy)
        cm.counter.wait_exact()
        if on_session is not None:
            on_session(cm)
        added = 0
        messages = recorded.messages
        for index, answer in enumerate(messages):
            if answer.role != "assistant":
                continue
            pending = messages[added:index]
            if pending:
                if on_added is not None:
                    for m in pending:
                        on_added(cm, m)
                cm.add(pending)
            if collect:
                gc.collect()
            cm.prepare()
            _background.wait_idle()  # the model call: the read-ahead runs now
            if on_turn is not None:
                on_turn(cm)
            if on_added is not None:
                on_added(cm, answer)
            cm.add(answer)
            added = index + 1
        if on_end is not None:
            on_end(cm)
        cm.close()


class ThreadTimers:
    """Thread CPU timers wrapped around functions, counted off the agent's thread only (the read-ahead's work).

    A masking turn that builds on the agent's thread what was not built ahead is not counted. Each timer costs ~2-4
    us a call; ``labels`` keeps the order they were made in (printed so: each part under the one that holds it).
    """

    def __init__(self) -> None:
        self.spent: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.labels: list[str] = []
        self._agent = threading.current_thread()

    def wrap(self, owner: Any, name: str, label: str, *, only_from: Callable[..., Any] | None = None) -> Any:
        """Replace ``owner.name`` by itself timed under ``label``; return the timed function.

        ``only_from``: count only the calls that function makes itself (a counter's count of the placeholder).
        """
        inner: Callable[..., Any] = getattr(owner, name)
        code = only_from.__code__ if only_from is not None else None
        agent, spent, calls = self._agent, self.spent, self.calls

        @functools.wraps(inner)
        def part(*a: Any, **k: Any) -> Any:
            if threading.current_thread() is agent or (code is not None and sys._getframe(1).f_code is not code):
                return inner(*a, **k)
            started = time.thread_time()
            try:
                return inner(*a, **k)
            finally:
                spent[label] += time.thread_time() - started
                calls[label] += 1

        setattr(owner, name, part)
        self.labels.append(label)
        return part

    def rows(self, scale: float) -> Iterable[tuple[str, float, int]]:
        """(label, CPU seconds times ``scale``, calls) of each timer, in the order made."""
        for label in self.labels:
            yield label, self.spent[label] * scale, self.calls[label]


def best_cpu(step: Callable[[], Any], reps: int, before: Callable[[], None] | None = None) -> float:
    """The least thread CPU seconds ``step`` took over ``reps`` runs (``before`` runs untimed ahead of each)."""
    best = float("inf")
    for _ in range(reps):
        if before is not None:
            before()
        started = time.thread_time()
        step()
        best = min(best, time.thread_time() - started)
    return best
