"""Reading cached tool outputs back: line slices, grep, and the two tools an agent calls to do it.

``tool_output_cache(ref_id, offset?, limit?)`` returns numbered lines like a file read;
``tool_output_cache_grep(pattern, ref_id?, context?, max_matches?)`` searches one or every cached output. Both
stream the blob in chunks through a small line index stored next to it, so a slice of a 100 MB output costs a few
chunk reads. Errors (unknown ref, bad regex, offset past the end) come back as tool results that say what to do,
never as exceptions that would break the agent loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..errors import RefNotFound, StoreError
from ..formats.tool_schemas import tool_schema
from ..messages import Message, ToolCall
from ..truncate import CutGuard
from ..untrusted import UntrustedPattern, answer_safely, decode_arguments, search_runs

# The line index and line streaming live in retrieval_index; the names are re-exported here, where they always were.
from ._line_index import line_start, stream_lines

if TYPE_CHECKING:
    from .blobs import BlobStore
    from .refs import ToolOutputRef

__all__ = [
    "DEFAULT_GREP_MATCHES",
    "DEFAULT_READ_LIMIT",
    "GREP_TOOL",
    "READ_TOOL",
    "RETRIEVAL_TOOL_NAMES",
    "GrepMatch",
    "GrepResult",
    "ReadResult",
    "execute_tool_call",
    "grep_refs",
    "read_lines",
    "retrieval_tool_schemas",
]

READ_TOOL = "tool_output_cache"
GREP_TOOL = "tool_output_cache_grep"
RETRIEVAL_TOOL_NAMES = frozenset({READ_TOOL, GREP_TOOL})

# Lines per read when the agent gives no limit: a screenful of a file view, as file-reading tools default to.
DEFAULT_READ_LIMIT = 200
# A read never returns more than this many lines, however large the limit asked for.
MAX_READ_LIMIT = 2_000
# A read result stays under this many bytes (below the 50 KiB write-time cap, so that a read is never itself cut
# and cached again); past it the result says where to continue.
MAX_RESULT_BYTES = 40 * 1024
# Matches per grep when the agent gives no cap, and the most it may ask for.
DEFAULT_GREP_MATCHES = 50
MAX_GREP_MATCHES = 500
# A grep pattern is a line of regex, not a document (the same cap as history_search's).
MAX_PATTERN_CHARS = 1_000
# Context lines around a match, at most.
MAX_GREP_CONTEXT = 20
# Only this much of an enormous single line is matched against the pattern (bounded memory while streaming).
GREP_LINE_BYTES = 256 * 1024
# UTF-8 takes up to 4 bytes per character: keeping this many bytes of a line is enough for max_line_length chars.
UTF8_MAX_BYTES = 4


# -- reading a slice ----------------------------------------------------------------------------------------------


def _display(raw: bytes, length: int, max_line_length: int, guard: CutGuard | None = None) -> str:
    cut = length > len(raw)
    text = raw.decode("utf-8", "ignore" if cut else "replace")
    if text.endswith("\r"):
        text = text[:-1]
    if len(text) > max_line_length or cut:
        # (the cut never falls inside a secret the guard knows: a piece of one would be recognised by nothing)
        at = guard(text, max_line_length, True) if guard is not None else max_line_length
        return f"{text[:at]}… [line cut: {length:,} bytes]"
    return text


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Lines ``offset`` .. ``offset + len(lines) - 1`` of a cached output (each cut at the line limit)."""

    ref: ToolOutputRef
    offset: int
    lines: tuple[str, ...]
    next_offset: int | None

    def format(self) -> str:
        """Numbered lines like a file read, and where to continue when there is more."""
        width = len(str(max(self.ref.line_count, 1)))
        body = [f"{n:>{width}}\t{line}" for n, line in enumerate(self.lines, start=self.offset)]
        last = self.offset + len(self.lines) - 1
        head = f"[{self.ref.id}: lines {self.offset}-{last} of {self.ref.line_count}]"
        if self.next_offset is not None:
            body.append(f'[more: continue with tool_output_cache(ref_id="{self.ref.id}", offset={self.next_offset})]')
        return "\n".join([head, *body])


def read_lines(
    store: BlobStore,
    ref: ToolOutputRef,
    offset: int = 1,
    limit: int | None = None,
    *,
    max_line_length: int,
    max_bytes: int | None = None,
    guard: CutGuard | None = None,
) -> ReadResult:
    """Read ``limit`` lines from 1-based ``offset``, touching only the chunks that hold them.

    ``max_bytes`` stops early (at least one line is returned) so that a tool result stays readable; the result's
    ``next_offset`` says where to continue.

    Raises:
        ValueError: ``offset`` < 1, ``limit`` < 1, or ``offset`` past the last line (the message says how many
            lines there are).
    """
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 1:
        raise ValueError(f"offset must be a line number >= 1, got {offset!r}")
    if limit is None:
        limit = DEFAULT_READ_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a number of lines >= 1, got {limit!r}")
    if offset > ref.line_count:
        raise ValueError(f"offset {offset} is past the end: {ref.id} has {ref.line_count} lines")
    start = line_start(store, ref.id, ref.byte_size, offset)
    lines: list[str] = []
    spent = 0
    for raw, length in stream_lines(store, ref.id, start, ref.byte_size, keep=max_line_length * UTF8_MAX_BYTES):
        line = _display(raw, length, max_line_length, guard)
        if max_bytes is not None:
            spent += len(line.encode("utf-8", "surrogatepass")) + 12  # the number column and newline
            if lines and spent > max_bytes:
                break
        lines.append(line)
        if len(lines) >= limit:
            break
    after = offset + len(lines)
    return ReadResult(ref, offset, tuple(lines), after if after <= ref.line_count else None)


# -- grep ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GrepMatch:
    """A matching line with its context lines (``(line number, text)`` pairs)."""

    ref_id: str
    line_number: int
    line: str
    before: tuple[tuple[int, str], ...] = ()
    after: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True, slots=True)
class GrepResult:
    """Matches in search order (refs sorted, lines ascending); ``truncated`` when ``max_matches`` stopped the search."""

    pattern: str
    matches: tuple[GrepMatch, ...]
    searched: int
    truncated: bool = False

    def format(self) -> str:
        """``ref:line:text`` for matches and ``ref-line-text`` for context, groups split by ``--`` (like grep)."""
        if not self.matches:
            return f"no match for /{self.pattern}/ in {self.searched} cached output(s)"
        out = [f"{len(self.matches)} match(es) for /{self.pattern}/ in {self.searched} cached output(s)"]
        for k, m in enumerate(self.matches):
            if k and (m.before or m.after or self.matches[k - 1].after):
                out.append("--")
            out.extend(f"{m.ref_id}-{n}-{text}" for n, text in m.before)
            out.append(f"{m.ref_id}:{m.line_number}:{m.line}")
            out.extend(f"{m.ref_id}-{n}-{text}" for n, text in m.after)
        if self.truncated:
            out.append(
                f"[stopped after {len(self.matches)} matches; there may be more: "
                "narrow the pattern or raise max_matches]"
            )
        text = "\n".join(out)
        if len(text.encode("utf-8", "surrogatepass")) > MAX_RESULT_BYTES:
            text = text.encode("utf-8", "surrogatepass")[:MAX_RESULT_BYTES].decode("utf-8", "ignore")
            text += "\n[result cut at 40 KiB: narrow the pattern or lower max_matches/context]"
        return text


@dataclass(slots=True)
class _Open:
    ref_id: str
    line_number: int
    line: str
    before: tuple[tuple[int, str], ...]
    after: list[tuple[int, str]] = field(default_factory=list)

    def close(self) -> GrepMatch:
        return GrepMatch(self.ref_id, self.line_number, self.line, self.before, tuple(self.after))


def grep_refs(
    store: BlobStore,
    refs: Sequence[ToolOutputRef],
    pattern: str,
    *,
    context: int = 0,
    max_matches: int | None = None,
    max_line_length: int,
    guard: CutGuard | None = None,
) -> GrepResult:
    """Search ``refs`` line by line for the regular expression ``pattern``, streaming each output.

    Raises:
        ValueError: an invalid regular expression, or a negative ``context`` / non-positive ``max_matches``.
        PatternTimeout: the search ran past :data:`~contextfold.untrusted.PATTERN_TIME_LIMIT_S` (a
            ``ValueError`` too).
    """
    regex = UntrustedPattern(pattern)  # the model chose it: bounded in time (ReDoS)
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise ValueError(f"context must be a number of lines >= 0, got {context!r}")
    context = min(context, MAX_GREP_CONTEXT)
    cap = DEFAULT_GREP_MATCHES if max_matches is None else max_matches
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"max_matches must be >= 1, got {max_matches!r}")
    cap = min(cap, MAX_GREP_MATCHES)
    regex.start()
    done: list[GrepMatch] = []
    open_: list[_Open] = []
    truncated = False

    def wanted() -> int:  # the matches the cap still lets in
        return cap - len(done) - len(open_)

    for ref in refs:
        if truncated:
            break
        # Lines are rendered for the answer (cut, guarded) only when shown: a match or its context. Most lines of a
        # grep are neither, and rendering each was most of a grep's time past the regex.
        before: deque[tuple[int, bytes, int]] = deque(maxlen=context or 1)
        open_ = []
        lines = stream_lines(store, ref.id, 0, ref.byte_size, keep=GREP_LINE_BYTES)
        searched = _searched(regex, lines, wanted)
        for n, (raw, length, hit) in enumerate(searched, start=1):
            shown: str | None = None
            if open_:
                shown = _display(raw, length, max_line_length, guard)
                for o in open_:
                    o.after.append((n, shown))
                done.extend(o.close() for o in open_ if len(o.after) >= context)
                open_ = [o for o in open_ if len(o.after) < context]
            if truncated:
                if not open_:
                    break
                continue
            if hit:
                if shown is None:
                    shown = _display(raw, length, max_line_length, guard)
                shown_before = tuple((k, _display(r, n_bytes, max_line_length, guard)) for k, r, n_bytes in before)
                m = _Open(ref.id, n, shown, shown_before if context else ())
                if context:
                    open_.append(m)
                else:
                    done.append(m.close())
                if len(done) + len(open_) >= cap:
                    truncated = True
                    if not open_:
                        break
            if context:
                before.append((n, raw, length))
        done.extend(o.close() for o in open_)
    return GrepResult(pattern, tuple(done), len(refs), truncated)


def _searched(regex: UntrustedPattern, lines: Iterator[tuple[bytes, int]],
              wanted: Callable[[], int]) -> Iterator[tuple[bytes, int, bool]]:
    """Each streamed line with whether it matches, searched a run at a time.

    A run stops searching at the ``wanted()`` matches still missing when it starts: the lines past the grep's match
    cap are not searched.
    """
    for run in search_runs(lines, lambda line: len(line[0])):
        missing = wanted()
        texts = [raw.decode("utf-8", "replace").removesuffix("\r") for raw, _ in run] if missing > 0 else []
        hits = regex.search_each(texts, max_hits=missing) if texts else []
        for at, (raw, length) in enumerate(run):
            yield raw, length, at < len(hits) and hits[at]


# -- the tools ----------------------------------------------------------------------------------------------------

# Every request carries these declarations: each word is paid on every call (issue 21 §6: the three retrieval tools
# took ~630 tokens a request; 247 by count_tools for gpt-4o now, history_search included). Declared: what the model
# needs to use a tool well (the ref form, paging, what an answer looks like). Not declared, still accepted: the rarely
# useful knobs (grep's max_matches) and bounds the executor enforces anyway (it clamps or answers what to fix);
# ``additionalProperties`` too, since an unknown argument gets an answer naming the ones taken.
_READ_DESCRIPTION = "Page through a cut tool output (ref=tout_...) as numbered lines; limit defaults to 200."
_GREP_DESCRIPTION = "Regex search in cut tool outputs (one ref_id or all); returns ref:line:text."
_READ_PARAMETERS: dict[str, object] = {
    "type": "object",
    "properties": {"ref_id": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
    "required": ["ref_id"],
}
_GREP_PARAMETERS: dict[str, object] = {
    "type": "object",
    "properties": {"pattern": {"type": "string"}, "ref_id": {"type": "string"}, "context": {"type": "integer"}},
    "required": ["pattern"],
}
# What each executor takes: the declared arguments and the undeclared ones above.
_ACCEPTED: dict[str, tuple[str, ...]] = {
    READ_TOOL: ("ref_id", "offset", "limit"),
    GREP_TOOL: ("pattern", "ref_id", "context", "max_matches"),
}
_TOOLS = ((READ_TOOL, _READ_DESCRIPTION, _READ_PARAMETERS), (GREP_TOOL, _GREP_DESCRIPTION, _GREP_PARAMETERS))


def retrieval_tool_schemas(format: str = "openai_chat") -> list[dict[str, object]]:
    """The two retrieval tools as ``format`` declares tools: ``openai_chat``, ``openai_responses``, ``anthropic``.

    Raises:
        ValueError: for another format name.
    """
    return [tool_schema(format, name, description, parameters) for name, description, parameters in _TOOLS]


def is_retrieval_call(call: ToolCall) -> bool:
    """Whether ``call`` is one of the retrieval tools (answer it with :func:`execute_tool_call`)."""
    return call.name in RETRIEVAL_TOOL_NAMES


class OutputReader(Protocol):
    """What answering a retrieval call needs of the cache (:class:`~contextfold.cache.ToolOutputCache` has it)."""

    def read(self, ref_id: str, offset: int = 1, limit: int | None = None, *,
             max_bytes: int | None = None) -> ReadResult: ...

    def grep(self, pattern: str, ref_id: str | None = None, *, context: int = 0,
             max_matches: int | None = None) -> GrepResult: ...


def execute_tool_call(cache: OutputReader, call: ToolCall) -> Message:
    """Answer a retrieval tool call with a tool result message; every failure is a result that says what to fix."""
    return Message.tool(call.id, answer_safely(call, lambda c: _answer(cache, c)), name=call.name)


def _answer(cache: OutputReader, call: ToolCall) -> str:
    if call.name not in RETRIEVAL_TOOL_NAMES:
        return f"error: unknown tool {call.name!r}; the cache answers {READ_TOOL} and {GREP_TOOL}"
    args = decode_arguments(call)
    if isinstance(args, str):
        return args
    accepted = _ACCEPTED[call.name]
    unknown = sorted(set(args) - set(accepted))
    if unknown:
        return f"error: {call.name} does not take {', '.join(unknown)}; it takes {', '.join(accepted)}"
    try:
        if call.name == READ_TOOL:
            ref_id = args.get("ref_id")
            if not isinstance(ref_id, str) or not ref_id:
                return "error: ref_id is required: the id shown in a cut output, e.g. ref=tout_0123456789abcdef"
            offset = _int_arg(args, "offset", 1) or 1
            limit = min(_int_arg(args, "limit", DEFAULT_READ_LIMIT) or DEFAULT_READ_LIMIT, MAX_READ_LIMIT)
            return cache.read(ref_id, offset, limit, max_bytes=MAX_RESULT_BYTES).format()
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            return "error: pattern is required: a regular expression to search for"
        if len(pattern) > MAX_PATTERN_CHARS:
            return f"error: pattern is {len(pattern):,} characters; keep it under {MAX_PATTERN_CHARS:,}"
        ref_arg = args.get("ref_id")
        if ref_arg is not None and not isinstance(ref_arg, str):
            return f"error: ref_id must be a string, got {type(ref_arg).__name__}"
        result = cache.grep(
            pattern,
            ref_arg or None,
            context=min(_int_arg(args, "context", 0) or 0, MAX_GREP_CONTEXT),  # undeclared bound: clamped
            max_matches=_int_arg(args, "max_matches", None),
        )
        return result.format()
    except RefNotFound as exc:
        asked = args.get("ref_id")
        lost = getattr(cache, "lost", None)
        if isinstance(asked, str) and callable(lost) and lost(asked):
            return (f"error: the full output of {asked} is no longer stored (the tool output store lost it); what "
                    f"the conversation shows of it is all that is left: run the tool that produced it again if you "
                    f"need more")
        return f"error: {exc}; use a ref id shown in the conversation (ref=tout_...)"
    except (ValueError, TypeError) as exc:
        return f"error: {exc}"
    except StoreError as exc:
        return f"error: the tool output store failed, try again later ({exc})"


def _int_arg(args: dict[str, object], name: str, default: int | None) -> int | None:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)  # models sometimes quote numbers
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value
