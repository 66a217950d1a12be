"""A sink that builds events later and hears about spans, counting how often each optional method is looked up.

Shared by the tracer's and the fanout's hook tests (issue 22: each looks a sink's optional methods up once).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from contextfold.telemetry.events import PendingEvent

HOOKS = ("emit_later", "span_started", "span_dropped")


class LaterSink:
    def __init__(self) -> None:
        self.pending: list[PendingEvent] = []
        self.started: list[str] = []
        self.dropped: list[str] = []
        self.looked_up: Counter[str] = Counter()

    def __getattribute__(self, name: str) -> Any:
        if name in HOOKS:
            object.__getattribute__(self, "looked_up")[name] += 1
        return object.__getattribute__(self, name)

    def emit(self, event: Any) -> None:  # pragma: no cover - every event here is sent later
        raise AssertionError("expected emit_later")

    def emit_later(self, pending: PendingEvent) -> None:
        self.pending.append(pending)

    def span_started(self, span: Any) -> None:
        self.started.append(span.name)

    def span_dropped(self, span: Any) -> None:
        self.dropped.append(span.name)
