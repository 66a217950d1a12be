"""What ``history_search`` searches, kept between calls: the archived transcripts read once, cut outputs once.

Every call used to read every archived transcript from the store, parse it, merge the views and read every masked or
truncated output whole back from the blob store (``resolve_ref``), to search them line by line: the cost of a call
grew with everything the session ever archived (issue 22's "Left out": 10,000 masked outputs meant 10,000 blob reads
a call). :class:`SearchIndex` keeps, per session, the parsed transcripts by number, the merged history, and each
message's searchable lines (a cut output's lines read in full once: refs are content-addressed, so a ref's text never
changes). A call lists the transcript numbers (one store call), reads only the transcripts it has not seen, and
searches the kept lines. The search itself still runs the model's pattern over every kept line (in C, under its time
limit): no index can answer an arbitrary regular expression.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import RefNotFound
from ..messages import Message
from ._archive import Archive, merge_histories

__all__ = ["MAX_INDEX_CHARS", "IndexedLine", "SearchIndex", "searchable_lines"]

# The most characters of full outputs (read back through resolve_ref) an index keeps; past it, further outputs are
# read back on each call as before. 64M characters is a few hundred MB at most in Python strings.
MAX_INDEX_CHARS = 64 * 1024 * 1024
_VIEW_KINDS = ("masked", "truncated")


# One searchable line: (the message's place in the merged history, the message, its ref when still cut, the line's
# number in it, the line). A tuple: an index of 10,000 outputs holds 300,000 of them.
IndexedLine = tuple[int, Message, object, int, str]


def searchable_lines(m: Message) -> list[str]:
    """The lines of ``m`` a search looks at: its text's lines, then one ``-> name(arguments)`` per tool call."""
    lines = m.text.split("\n") if m.text else []
    lines.extend(f"-> {c.name}({c.arguments})" for c in m.tool_calls)
    return lines


@dataclass(slots=True)
class _Lines:
    """A message's ref (when still cut) and lines, and its indexed lines as built at its place in the history."""

    ref: object
    lines: list[str]
    index: int = -1
    built: list[IndexedLine] = field(default_factory=list)


@dataclass
class _Transcript:
    messages: list[Message]
    problems: list[str]  # its unreadable lines, told again to each call's on_bad_line


class SearchIndex:
    """One session's searchable history, brought up to date by :meth:`lines` (thread-safe).

    Args:
        archive: Where the session's transcripts are.
        session_id: The session.
        resolve_ref: ref id -> full text (the session's own cache), or None to search the cut views.
        max_chars: The most characters of full outputs kept (:data:`MAX_INDEX_CHARS`).
    """

    def __init__(self, archive: Archive, session_id: str, *, resolve_ref: Callable[[str], str] | None = None,
                 max_chars: int = MAX_INDEX_CHARS) -> None:
        self.archive = archive
        self.session_id = session_id
        self.resolve_ref = resolve_ref
        self.max_chars = max_chars
        self._lock = threading.Lock()
        self._transcripts: dict[int, _Transcript] = {}
        self._numbers: tuple[int, ...] = ()
        self._generation = -1
        self._history: list[Message] = []
        self._lines: list[IndexedLine] = []
        self._kept_chars = 0
        # the full outputs read back, by ref, and the lines of each merged message (by the parsed object's id: the
        # transcripts hold them for as long as the index does)
        self._resolved: dict[str, str] = {}
        self._message_lines: dict[int, _Lines] = {}
        self.reads = 0  # transcripts and outputs read from the stores so far (what the cache saves shows here)

    def lines(self, on_bad_line: Callable[[str], None]) -> tuple[list[Message], list[IndexedLine], int]:
        """The merged history, its searchable lines and the number of transcripts, read anew only where new.

        Unreadable archived lines (of any transcript, read now or before) are told to ``on_bad_line``.
        """
        with self._lock:
            numbers = tuple(self.archive.transcript_numbers(self.session_id))
            generation = self.archive.generation(self.session_id)
            if generation != self._generation:
                self._transcripts.clear()  # (a transcript the archive replaced since: read every one again)
            for n in numbers:
                if n not in self._transcripts:
                    problems: list[str] = []
                    messages = self.archive.transcript(self.session_id, n, on_bad_line=problems.append)
                    self._transcripts[n] = _Transcript(messages, problems)
                    self.reads += 1
            for gone in set(self._transcripts) - set(numbers):
                del self._transcripts[gone]
            if numbers != self._numbers or generation != self._generation:
                self._history = merge_histories(self._transcripts[n].messages for n in numbers)
                self._numbers, self._generation = numbers, generation
                self._rebuild()
            else:
                self._refresh_unkept()
            for n in numbers:
                for problem in self._transcripts[n].problems:
                    on_bad_line(problem)
            return self._history, self._lines, len(numbers)

    def _rebuild(self) -> None:
        kept: dict[int, _Lines] = {}
        out: list[IndexedLine] = []
        for index, m in enumerate(self._history):
            entry = self._message_lines.get(id(m))
            if entry is None:
                ref, lines, keep = self._read(m)
                entry = _Lines(ref, lines)
                if keep:
                    kept[id(m)] = entry
            else:
                kept[id(m)] = entry
            if entry.index != index:  # (built once per place: a history only grows at its end between transcripts)
                entry.index = index
                entry.built = [(index, m, entry.ref, number, line) for number, line in enumerate(entry.lines, 1)]
            out.extend(entry.built)
        self._message_lines = kept
        self._lines = out

    def _refresh_unkept(self) -> None:
        """Outputs past the size cap are read back on each call, as before the index (their lines are not kept)."""
        if len(self._message_lines) < len(self._history):
            self._rebuild()

    def _read(self, m: Message) -> tuple[object, list[str], bool]:
        """``(ref still shown, lines, keep them)`` of ``m``: a cut output's full text read back, kept under the cap."""
        ref = m.meta.get("ref")
        if self.resolve_ref is None or not isinstance(ref, str) or m.kind not in _VIEW_KINDS:
            return ref, searchable_lines(m), True
        text = self._resolved.get(ref)
        if text is None:
            try:
                text = self.resolve_ref(ref)
            except (RefNotFound, KeyError):
                return ref, searchable_lines(m), False  # (asked again next call, as before)
            self.reads += 1
            if self._kept_chars + len(text) > self.max_chars:
                return None, searchable_lines(m.with_content(text)), False
            self._resolved[ref] = text
            self._kept_chars += len(text)
        return None, searchable_lines(m.with_content(text)), True
