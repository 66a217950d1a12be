"""``history_search``: a tool the agent calls to find what compaction took out of its view.

It searches the session's archived pre-compaction transcripts (each message once, in conversation order) line by
line with a regular expression, and answers with ``#index role: line`` hits. Declare it with
:func:`history_search_schema` in the provider's tool format and answer calls with
:meth:`HistorySearchTool.execute_tool_call`; every failure is a tool result that says what to fix, never an
exception in the agent loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import RefNotFound, StoreError
from ..formats.tool_schemas import tool_schema
from ..messages import Message, ToolCall
from ..untrusted import InvalidPattern, UntrustedPattern, answer_safely, decode_arguments, search_runs
from ._archive import Archive, merge_histories

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "HISTORY_SEARCH_TOOL",
    "HistoryHit",
    "HistorySearchResult",
    "HistorySearchTool",
    "history_search",
    "history_search_schema",
]

HISTORY_SEARCH_TOOL = "history_search"
# Enough hits to orient, few enough that one answer costs a few thousand tokens at most.
DEFAULT_MAX_RESULTS = 20
# A hard cap whatever the model asks for: more hits than this should be a narrower pattern.
MAX_RESULTS = 200
# Each hit shows one line; a minified file or a base64 blob must not turn one hit into 100 KB of context.
MAX_HIT_CHARS = 300
# Answers stay under this size (~10K tokens) even at MAX_RESULTS; the rest is counted, not shown.
MAX_ANSWER_CHARS = 40_000
# Python's re has no timeout: bounding the pattern keeps a model-written expression from running away.
MAX_PATTERN_CHARS = 1_000
ROLE_NAMES = ("system", "developer", "user", "assistant", "tool")

# Sent with every request: kept short (see the retrieval tools' declarations in contextfold.cache.retrieval); the
# undeclared knobs (ignore_case, max_results) are still accepted, a wrong role is answered with the valid ones.
_DESCRIPTION = (
    "Regex search in turns that were summarized or removed, for details a summary dropped; returns #index role: text."
)
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"pattern": {"type": "string"}, "role": {"type": "string"}},
    "required": ["pattern"],
}
_ACCEPTED = ("pattern", "role", "ignore_case", "max_results")


@dataclass(frozen=True, slots=True)
class HistoryHit:
    """One matching line: the message's position in the restored history, its role and the line."""

    index: int
    role: str
    line_number: int
    text: str
    message_id: str | None = None
    tool_name: str | None = None
    ref: str | None = None

    def format(self) -> str:
        """``#12 tool (bash) L3: text`` with a pointer to the full output when the archived one was cut."""
        who = f"{self.role} ({self.tool_name})" if self.tool_name else self.role
        where = f" [full output: ref={self.ref}]" if self.ref else ""
        return f"#{self.index} {who} L{self.line_number}: {self.text}{where}"


@dataclass(frozen=True, slots=True)
class HistorySearchResult:
    """The hits of one search and how much was searched."""

    pattern: str
    hits: tuple[HistoryHit, ...]
    total_hits: int
    messages_searched: int
    transcripts: int
    skipped_lines: int = 0

    def format(self) -> str:
        """The answer the agent reads."""
        if self.transcripts == 0:
            return "history_search: nothing has been archived yet in this session; the whole history is in context."
        head = (
            f"history_search: {self.total_hits} matching line{'s' if self.total_hits != 1 else ''} for "
            f"/{self.pattern}/ in {self.messages_searched} archived messages"
        )
        if self.skipped_lines:
            head += f" ({self.skipped_lines} unreadable archived line{'s' if self.skipped_lines != 1 else ''} skipped)"
        lines = [head]
        size = len(head)
        shown = 0
        for hit in self.hits:
            text = hit.format()
            if size + len(text) + 1 > MAX_ANSWER_CHARS:
                break
            lines.append(text)
            size += len(text) + 1
            shown += 1
        if self.total_hits > shown:
            lines.append(f"... {self.total_hits - shown} more; narrow the pattern or pass role / max_results")
        return "\n".join(lines)


def _clip(line: str) -> str:
    line = line.rstrip("\r")
    return line if len(line) <= MAX_HIT_CHARS else line[:MAX_HIT_CHARS] + f"… [+{len(line) - MAX_HIT_CHARS} chars]"


def _searchable_lines(m: Message) -> list[str]:
    lines = m.text.split("\n") if m.text else []
    lines.extend(f"-> {c.name}({c.arguments})" for c in m.tool_calls)
    return lines


def _history_lines(history: list[Message], role: str | None, resolve_ref: Callable[[str], str] | None,
                   ) -> Iterator[tuple[int, Message, object, int, str]]:
    """``(index, message, its ref, line number, line)`` for each line to search, cut outputs read back in full."""
    for index, m in enumerate(history):
        if role is not None and m.role != role:
            continue
        ref = m.meta.get("ref")
        if resolve_ref is not None and isinstance(ref, str) and m.kind in ("masked", "truncated"):
            try:
                m = m.with_content(resolve_ref(ref))
                ref = None
            except (RefNotFound, KeyError):
                pass
        for line_number, line in enumerate(_searchable_lines(m), start=1):
            yield index, m, ref, line_number, line


def history_search(
    pattern: str,
    session_id: str,
    *,
    archive: Archive,
    role: str | None = None,
    ignore_case: bool = True,
    max_results: int = DEFAULT_MAX_RESULTS,
    resolve_ref: Callable[[str], str] | None = None,
    on_bad_line: Callable[[str], None] | None = None,
) -> HistorySearchResult:
    """Search a session's archived history.

    Args:
        pattern: a Python regular expression.
        session_id: the session whose archive is searched.
        archive: where the transcripts are.
        role: only messages of this role.
        ignore_case: case-insensitive matching.
        max_results: matching lines to keep (the total is still counted), at most :data:`MAX_RESULTS`.
        resolve_ref: ref id -> full text; when given, truncated and masked outputs are searched in full. Give the
            session's own cache (``ToolOutputCache.get`` checks ownership): an archive line naming another
            session's ref must not bring that output into this session's answers.
        on_bad_line: told about each archived line that is not a message (a torn write, binary data); the line is
            skipped and the rest searched.

    Raises:
        ValueError: for an invalid or over-long pattern, an unknown role or a bad ``max_results``; a
            :class:`~contextfold.untrusted.PatternTimeout` when the search runs past its time limit.
    """
    if not pattern:
        raise ValueError("pattern is required: a regular expression to search for")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"pattern is {len(pattern)} characters; keep it under {MAX_PATTERN_CHARS}")
    if role is not None and role not in ROLE_NAMES:
        raise ValueError(f"role must be one of {', '.join(ROLE_NAMES)}, got {role!r}")
    if not 1 <= max_results <= MAX_RESULTS:
        raise ValueError(f"max_results must be between 1 and {MAX_RESULTS}, got {max_results}")
    try:
        rx = UntrustedPattern(pattern, ignore_case=ignore_case)  # the model chose it: bounded in time (ReDoS)
    except InvalidPattern as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc.reason}") from None

    skipped: list[str] = []

    def skip(problem: str) -> None:
        skipped.append(problem)
        if on_bad_line is not None:
            on_bad_line(problem)

    transcripts = archive.transcripts(session_id, on_bad_line=skip)
    history = merge_histories(messages for _, messages in transcripts)
    rx.start()
    hits: list[HistoryHit] = []
    total = 0
    for run in search_runs(_history_lines(history, role, resolve_ref), lambda line: len(line[4])):
        for (index, m, ref, line_number, line), hit in zip(run, rx.search_each([line[4] for line in run]), strict=True):
            if not hit:
                continue
            total += 1
            if len(hits) < max_results:
                mid = m.meta.get("id")
                hits.append(
                    HistoryHit(
                        index=index,
                        role=m.role,
                        line_number=line_number,
                        text=_clip(line),
                        message_id=None if mid is None else str(mid),
                        tool_name=m.name if m.role == "tool" else None,
                        ref=ref if isinstance(ref, str) else None,
                    )
                )
    return HistorySearchResult(pattern, tuple(hits), total, len(history), len(transcripts), len(skipped))


def history_search_schema(format: str = "openai_chat") -> dict[str, Any]:
    """The tool declaration in ``format``: ``openai_chat``, ``openai_responses`` or ``anthropic``.

    Raises:
        ValueError: for another format name.
    """
    return tool_schema(format, HISTORY_SEARCH_TOOL, _DESCRIPTION, _PARAMETERS)


class HistorySearchTool:
    """The ``history_search`` tool bound to one session: its schema and an executor for the model's calls.

    Args:
        archive: where the session's transcripts are.
        session_id: the session the agent is in (the model never chooses it).
        resolve_ref: ref id -> full text, to search cut tool outputs in full (the session's own cache).
        on_bad_line: told about each unreadable archived line the search skipped (e.g. to emit an event).
    """

    name = HISTORY_SEARCH_TOOL

    def __init__(self, archive: Archive, session_id: str, *, resolve_ref: Callable[[str], str] | None = None,
                 on_bad_line: Callable[[str], None] | None = None) -> None:
        self.archive = archive
        self.session_id = session_id
        self.resolve_ref = resolve_ref
        self.on_bad_line = on_bad_line

    def schema(self, format: str = "openai_chat") -> dict[str, Any]:
        """The declaration to add to the request's tools."""
        return history_search_schema(format)

    def handles(self, call: ToolCall) -> bool:
        """Whether ``call`` is a history_search call."""
        return call.name == HISTORY_SEARCH_TOOL

    def execute_tool_call(self, call: ToolCall) -> Message:
        """Answer ``call`` with a tool result message; a bad call gets a result saying what to fix."""
        return Message.tool(call.id, answer_safely(call, self._answer), name=call.name)

    def _answer(self, call: ToolCall) -> str:
        if call.name != HISTORY_SEARCH_TOOL:
            return f"error: unknown tool {call.name!r}; this executor answers {HISTORY_SEARCH_TOOL}"
        args = decode_arguments(call)
        if isinstance(args, str):
            return args
        unknown = sorted(set(args) - set(_ACCEPTED))
        if unknown:
            return f"error: {HISTORY_SEARCH_TOOL} does not take {', '.join(unknown)}; it takes {', '.join(_ACCEPTED)}"
        pattern, role = args.get("pattern"), args.get("role")
        ignore_case, max_results = args.get("ignore_case", True), args.get("max_results", DEFAULT_MAX_RESULTS)
        if not isinstance(pattern, str) or not pattern:
            return "error: pattern is required: a regular expression to search for"
        if role is not None and not isinstance(role, str):
            return f"error: role must be a string, got {role!r}"
        if not isinstance(ignore_case, bool):
            return f"error: ignore_case must be true or false, got {ignore_case!r}"
        if isinstance(max_results, str) and max_results.strip().isdigit():
            max_results = int(max_results)  # models sometimes quote numbers
        if isinstance(max_results, bool) or not isinstance(max_results, int):
            return f"error: max_results must be an integer, got {max_results!r}"
        try:
            result = history_search(
                pattern,
                self.session_id,
                archive=self.archive,
                role=role,
                ignore_case=ignore_case,
                max_results=max_results,
                resolve_ref=self.resolve_ref,
                on_bad_line=self.on_bad_line,
            )
        except ValueError as exc:
            return f"error: {exc}"
        except StoreError as exc:
            return f"error: the archive could not be read, try again later ({exc})"
        return result.format()
