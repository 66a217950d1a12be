"""Which of the patterns' trigger substrings a text holds: one pass over the text, when the library is installed.

Every scan asks which of the ~120 lower-case triggers (``password``, ``ghp_``, ``-----begin`` …) occur in the text, to
run only the patterns that can match. Looking for each one in turn reads the text ~120 times (~85% of scanning a
text without secrets, and most of a short one's). An Aho-Corasick automaton (``ahocorasick-rs``, the optional extra
``contextfold[fast]``) finds all of them in one pass; without it, each is looked for in turn as before, with the
same result (``tests/test_redact_triggers.py`` checks both on the corpora).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ._anchors import repetitive

__all__ = ["TriggerFinder", "ascii_positions", "automaton_available"]

# How long the interpreter's exit waits for the automaton's calls in flight (each is milliseconds: one text).
_EXIT_WAIT_S = 2.0
_EXIT_POLL_S = 0.001


class _AutomatonClosed(Exception):
    """The interpreter is exiting: the automaton is no longer entered (the caller looks for each trigger in turn)."""


# The automaton's search gives the GIL away. A thread inside it when the interpreter finalizes is ended where it
# takes the GIL back, inside the library's frames, and that aborts the whole process ("FATAL: exception not
# rethrown", SIGABRT): a daemon thread of any kind (the read-ahead, the telemetry thread redacting an event, an
# application's) scanning at exit. At exit the automaton closes and the calls in flight are waited for.
_gate = threading.Lock()
_in_flight = 0
_closed = False


_MAIN_THREAD = threading.main_thread().ident


class _Automaton:
    """One set of words' automaton, for a ``str`` and for the ASCII bytes of an ASCII text.

    The library's ``str`` search maps every byte offset of the text to a character offset first, whatever it finds
    (a table of eight bytes per byte of the text, made and filled on each call): half the cost of a search of a
    tool output (issue 22, a cold compaction's prefilter). An ASCII text's bytes are its characters, and its offsets
    the same: that search is given the text's ASCII bytes (a copy at memory speed) instead.
    """

    __slots__ = ("_bytes", "_text")

    def __init__(self, words: Sequence[str]) -> None:
        import ahocorasick_rs

        dfa = ahocorasick_rs.Implementation.DFA
        self._text = ahocorasick_rs.AhoCorasick(list(words), implementation=dfa)
        # (the same words, in the same order: a match names the same word in both)
        self._bytes = ahocorasick_rs.BytesAhoCorasick([w.encode("utf-8", "surrogatepass") for w in words],
                                                      implementation=dfa)

    def find_matches_as_indexes(self, lowered: str, overlapping: bool = False) -> list[tuple[int, int, int]]:
        if lowered.isascii():
            found: list[tuple[int, int, int]] = self._bytes.find_matches_as_indexes(lowered.encode("ascii"),
                                                                                     overlapping=overlapping)
            return found
        text_found: list[tuple[int, int, int]] = self._text.find_matches_as_indexes(lowered, overlapping=overlapping)
        return text_found


def _find(automaton: Any, lowered: str | bytes, *, overlapping: bool = False) -> list[tuple[int, int, int]]:
    global _in_flight
    if threading.get_ident() == _MAIN_THREAD:  # (the thread that finalizes is never ended in a call: no gate)
        found: list[tuple[int, int, int]] = automaton.find_matches_as_indexes(lowered, overlapping)
        return found
    with _gate:
        if _closed:
            raise _AutomatonClosed
        _in_flight += 1
    try:
        gated: list[tuple[int, int, int]] = automaton.find_matches_as_indexes(lowered, overlapping)
        return gated
    finally:
        with _gate:
            _in_flight -= 1


def _close_at_exit() -> None:
    global _closed
    with _gate:
        _closed = True
    deadline = time.monotonic() + _EXIT_WAIT_S
    while _in_flight and time.monotonic() < deadline:
        time.sleep(_EXIT_POLL_S)  # (a condition would cost every call a notify; exit waits milliseconds once)


atexit.register(_close_at_exit)


def _automaton(triggers: Sequence[str]) -> Any:
    return _shared_automaton(tuple(triggers))


@lru_cache(maxsize=16)
def _shared_automaton(triggers: tuple[str, ...]) -> Any:
    """One automaton per set of triggers in the process (every redactor of the same patterns shares it).

    A DFA: twice as fast as the library's default on tool outputs (lm32b: 42 -> 26 ms to ask every text whether it
    holds a trigger, 49 -> 19 ms for all of them), for ~1 ms to build and ~160 KB, once per process; twice that with
    its twin for ASCII bytes (see :class:`_Automaton`).
    """
    if not automaton_available():
        return None
    return _Automaton(triggers)


def _bytes_automaton(words: tuple[str, ...]) -> Any:
    """An automaton of ``words`` over bytes (~0.2 ms for 15 words).

    Made for each search, not kept: the words are a session's remembered secrets, which a process-wide cache would
    hold past the session.
    """
    if not automaton_available():
        return None
    import ahocorasick_rs

    return ahocorasick_rs.BytesAhoCorasick([w.encode("utf-8", "surrogatepass") for w in words],
                                           implementation=ahocorasick_rs.Implementation.DFA)


def ascii_positions(words: tuple[str, ...], text: str) -> list[int] | None:
    """Where ``words`` occur in ``text`` (ASCII), not overlapping, in one pass; None without the automaton.

    Every place where none is part of an earlier match: a text holding a word has a position in it unless that
    occurrence overlaps a match (of a word not holding the separator of texts joined: the same text). None too
    for a word that is empty, and at the interpreter's exit.
    """
    if not words or not all(words):
        return None
    automaton = _bytes_automaton(words)
    if automaton is None:
        return None
    try:
        return [start for _, start, _ in _find(automaton, text.encode("ascii"))]
    except _AutomatonClosed:
        return None


@lru_cache(maxsize=16)
def _words(triggers: tuple[str, ...], heads: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[tuple[bool, bool], ...]]:
    """The automaton's strings (triggers, then heads), and whether each is a trigger and a head (once per process)."""
    words = tuple(dict.fromkeys((*triggers, *heads)))
    trigger_set, head_set = frozenset(triggers), frozenset(heads)
    return words, tuple((w in trigger_set, w in head_set) for w in words)


@lru_cache(maxsize=16)
def _needles(triggers: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """What is looked for without the automaton, once per process per set of triggers.

    The triggers holding no shorter one are looked for, and a longer one only inside a text holding a trigger it
    contains (a text with `passw` has `pass`). Every redactor (one per manager of a fleet worker's turn) compared each
    trigger with every other: ~3 ms.
    """
    needles = tuple(t for t in triggers if not any(o != t and o in t for o in triggers))
    return needles, {n: tuple(t for t in triggers if t != n and n in t) for n in needles}


def automaton_available() -> bool:
    """Whether the one-pass search is installed (``pip install 'contextfold[fast]'``)."""
    try:
        import ahocorasick_rs  # noqa: F401
    except ImportError:
        return False
    return True


class TriggerFinder:
    """The triggers a lower-cased text holds.

    Args:
        triggers: The lower-case substrings, none empty.
        one_pass: Use the automaton when it is installed (False: always look for each in turn).
    """

    def __init__(self, triggers: Sequence[str], *, one_pass: bool = True, heads: Sequence[str] = ()) -> None:
        self.triggers = tuple(dict.fromkeys(triggers))
        # Where the patterns' locating regexes can match (see ._anchors): found with the triggers, in one pass.
        # (Heads that repeat themselves are never given: see ._anchors.repetitive.)
        self.heads = tuple(dict.fromkeys(heads))
        # Triggers that repeat themselves (Twitter's ``a`` x 22) are looked for with ``in``, outside the automaton:
        # in a text repeating them they occur at every position, a match per character to look at (issue 22).
        self._repeating = tuple(t for t in self.triggers if repetitive(t))
        automaton_triggers = tuple(t for t in self.triggers if t not in self._repeating)
        self._words, self._word_is = _words(automaton_triggers, self.heads)
        self._reader = _automaton(self._words) if one_pass and self.heads else None
        self.needles, self._holding = _needles(self.triggers)
        self._automaton = _automaton(automaton_triggers) if one_pass and automaton_triggers else None
        self._automaton_triggers = automaton_triggers
        self._one_pass = one_pass and bool(self.triggers) and automaton_available()

    @property
    def one_pass(self) -> bool:
        """Whether the automaton is in use."""
        return self._one_pass and (self._automaton is not None or not self._automaton_triggers)

    def _repeated(self, lowered: str) -> set[str]:
        return {t for t in self._repeating if t in lowered}

    def present(self, lowered: str) -> set[str]:
        """Every trigger that occurs in ``lowered``."""
        if self.one_pass:
            triggers = self._automaton_triggers
            try:
                found = _find(self._automaton, lowered, overlapping=True) if self._automaton is not None else ()
            except (UnicodeEncodeError, _AutomatonClosed):
                pass  # (a lone surrogate cannot be handed to the library: looked for in turn)
            else:
                present = {triggers[i] for i, _, _ in found}
                return present | self._repeated(lowered) if self._repeating else present
        present = {t for t in self.needles if t in lowered}
        for needle in tuple(present):
            present.update(t for t in self._holding[needle] if t not in present and t in lowered)
        return present

    def read(self, lowered: str) -> tuple[set[str], dict[str, list[int]]] | None:
        """Every trigger in ``lowered``, and where each head starts in it (ascending); None without the automaton.

        One pass of the automaton for both (None too for a text it cannot be handed: a lone surrogate).
        """
        if self._reader is None:
            if not self.one_pass or self.heads:
                return None
            return self.present(lowered), {}  # (no heads: the triggers' own pass)
        try:
            found = _find(self._reader, lowered, overlapping=True)
        except (UnicodeEncodeError, _AutomatonClosed):
            return None
        words, word_is = self._words, self._word_is
        present: set[str] = self._repeated(lowered) if self._repeating else set()
        starts: dict[str, list[int]] = {}
        for i, start, _ in found:
            is_trigger, is_head = word_is[i]
            if is_trigger:
                present.add(words[i])
            if is_head:
                at = starts.get(words[i])
                if at is None:
                    starts[words[i]] = [start]
                else:
                    at.append(start)
        return present, starts

    def holds_any(self, lowered: str) -> bool:
        """Whether ``lowered`` holds at least one trigger."""
        if self.one_pass:
            try:
                if self._automaton is not None and _find(self._automaton, lowered):
                    return True
            except (UnicodeEncodeError, _AutomatonClosed):
                pass  # (a lone surrogate, as above)
            else:
                return any(t in lowered for t in self._repeating)
        return any(t in lowered for t in self.needles)

    def positions(self, lowered: str) -> list[int] | None:
        """Where triggers start in ``lowered`` (not overlapping), or None without the automaton or on a surrogate.

        For many short texts joined by a separator no trigger holds (a batch of message ids): one call instead of
        one per text; every text holding a trigger has a position in it.
        """
        if not self.one_pass:
            return None
        try:
            found = [start for _, start, _ in _find(self._automaton, lowered)] if self._automaton is not None else []
        except (UnicodeEncodeError, _AutomatonClosed):
            return None
        for trigger in self._repeating:  # (each occurrence's start, as the automaton gives them: not overlapping)
            at = lowered.find(trigger)
            while at >= 0:
                found.append(at)
                at = lowered.find(trigger, at + len(trigger))
        return found
