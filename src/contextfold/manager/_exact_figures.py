"""The figures a call records while the manager's counts are still provisional, counted exactly where they are made.

A manager counts with a lazy counter: until the exact tokenizer has loaded (~0.5 s of CPU, once per process, on a
background thread so that the first ``prepare()`` does not wait for it), texts count as their UTF-8 bytes, an upper
bound. Deciding "nothing to do" on bounds is safe, and every decision that acts waits for exact counts. The figures
a call records are another matter: the token estimate and the call span's tokens of a process's first calls would
be byte bounds, so the same session recorded different figures depending on when the tokenizer finished loading.

While counts are provisional those figures are made from the view as it stood, counted by an exact counter (the
tokenizer, format and overhead) where the event is built: on the telemetry thread for a sink that builds there (the
archive's events file, the exporters), so the agent's call does not wait; at once for a sink that takes built events
(the figures then need the tokenizer now). Once counts are exact the figures are the manager's own, as before.

The exact counter is the manager's own, made exact there: counting the figures needs the tokenizer anyway, and the
counts are then the ones the manager makes (its cache holds them, or does afterwards). A counter of the figures' own
shared nothing with the manager's (issue 22: a process's first call on 100,000 recorded messages left 0.8 s of
counting on the telemetry thread, its two events each counting the whole view again after the manager had counted it
exactly itself; and every call made before the tokenizer loaded counted its whole view twice).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..messages import Message
    from ..tokens import MessageCounter

__all__ = ["ExactFigures"]


class ExactFigures:
    """A view's figures (tokens, the pinned roles', the request extras') counted exactly when first asked.

    Holds the view's messages (immutable) and what the extras were; counted once, under a lock (a call's token
    estimate and its span ask for the same figures, possibly from another thread).
    """

    __slots__ = ("_counter", "_extras", "_figures", "_line", "_lock", "_messages")

    def __init__(self, counter: MessageCounter, messages: Sequence[Message], extras: Callable[[MessageCounter], int],
                 line: Message | None) -> None:
        self._counter = counter  # (the manager's: see _exact_counter)
        self._messages = tuple(messages)
        self._extras = extras
        self._line = line  # the budget line decisions count (Steering.decision_line), or None
        self._lock = threading.Lock()
        self._figures: tuple[int, int, int, int, int] | None = None

    def _made(self) -> tuple[int, int, int, int, int]:
        """(view tokens, system, developer, request extras, the budget line decisions count)."""
        with self._lock:
            if self._figures is None:
                counter = self._exact_counter()
                tokens = system = developer = 0
                for m, n in zip(self._messages, counter.count_each(self._messages), strict=True):
                    tokens += n  # (as View.totals and View.pinned_tokens count them)
                    if m.role == "system":
                        system += n
                    elif m.role == "developer":
                        developer += n
                line = counter.count_message(self._line) if self._line is not None else 0
                self._figures = (tokens, system, developer, self._extras(counter), line)
            return self._figures

    def _exact_counter(self) -> MessageCounter:
        """The manager's counter, made exact: waiting for the tokenizer, as counting exactly would anyway."""
        counter = self._counter
        counter.wait_exact()
        if counter.provisional:  # (a lazy text counter that is not ready once waited for: counted apart, as before)
            return counter.exact_copy()
        return counter

    def estimate(self) -> dict[str, int]:
        """The ``compact.token_estimate`` event's counts."""
        tokens, system, developer, extras, _ = self._made()
        return {"messages": tokens - system - developer, "tools_schema": extras, "system": system,
                "developer": developer}

    def call_tokens(self) -> dict[str, int]:
        """The call span's ``tokens``: the view and what decisions count beside it.

        (No grounding: one is only taken on exact counts, so there is none while counts are provisional.)
        """
        tokens, _, _, extras, line = self._made()
        return {"tokens": tokens + extras + line}
