"""The in-context view of a cached tool output: cut lines, head and tail within the caps, and the reading note.

Split from :mod:`contextfold.cache`, which builds views through :func:`render_view` and re-exports it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Protocol

from ..truncate import cut_by_chars, is_few_long_lines, shape_json
from ..truncate._text import cap_lines

if TYPE_CHECKING:
    from ..tokens import TokenCounter
    from .refs import ToolOutputRef

__all__ = ["SecretGuard", "cut_guard", "render_view"]


class SecretGuard(Protocol):
    """What the cache needs to keep secrets whole in what it writes (:class:`~contextfold.redact.Redactor` has it).

    A view that cuts a secret in two leaves a piece no rule recognises, and a digest or an outline that quotes a
    value bare repeats it without the context that made it recognisable.
    """

    def safe_cut(self, text: str, at: int, *, keep_head: bool = True) -> int:
        """``at``, or the edge of the secret ``at`` would split (its start when the head is kept)."""
        ...

    def blank(self, text: str) -> str:
        """``text`` with every secret (found or remembered) replaced by spaces."""
        ...

    def mentions_secret(self, text: str) -> bool:
        """Whether ``text`` (a word a digest would list) holds a secret or a piece of a remembered one."""
        ...

    def learn_text(self, text: str) -> None:
        """Remember the secrets ``text`` holds (a JSON output whose strings are cut without their keys)."""
        ...

    def digest_state(self) -> Hashable:
        """What :meth:`blank` and :meth:`mentions_secret` answer by besides the text: equal states, equal answers.

        A placeholder built ahead (its digest blanked and checked) stands while the state does not change.
        """
        ...


def cut_guard(secrets: SecretGuard | None) -> Callable[[str, int, bool], int] | None:
    """The cut guard of ``secrets`` (None without them): where a line, a string or a head may be cut."""
    if secrets is None:
        return None
    return lambda text, at, keep_head: secrets.safe_cut(text, at, keep_head=keep_head)

# -- the in-context view ----------------------------------------------------------------------------------------
# Not truncate_text: the view must be cut at line boundaries and name the omitted line range, so that the model can
# page to it with tool_output_cache(offset=...); and a 100 MB output must not be token-counted whole.

# Room kept for the omission marker and the closing note, so the whole view stays under the byte cap.
VIEW_NOTE_RESERVE_BYTES = 600
# Tokens kept for the same notes (about 600 bytes of mostly ASCII at 3-4 bytes per token, with margin).
VIEW_NOTE_RESERVE_TOKENS = 200
# Head and tail share what is left evenly: the command and first results are at the top, errors and summaries
# (test runs, tracebacks) at the bottom.
VIEW_HEAD_SHARE = 0.5
# Summed per-line counts can undershoot the count of the joined text; shrink by this much until the view fits.
VIEW_SHRINK_FACTOR = 0.85
VIEW_MAX_SHRINKS = 8
# Share of the view's budget given to the outline of the omitted lines: definitions, elisions, errors and hunk
# headers with their line numbers, which is what an agent pages to next (``view_range [718, 749]``).
VIEW_OUTLINE_SHARE = 0.2
OUTLINE_LINE_CHARS = 120
# The runs before the keyword are possessive (``*+``, ``++``, ``?+``): no keyword starts with a space, a digit followed
# by a separator, or a colon, so giving characters back never lets a line match that did not, and the plain runs
# tried every way to split a numbered listing's padding (~12 µs a line, ~120 ms for a 10,000-line listing cut at
# add(); now ~1 µs). Same lines matched: tests/cache/test_cache_outline_pattern.py checks it against the plain form.
_OUTLINE = re.compile(
    r"^\s*+(?:\d++[\t :]++)?+\s*+(?:(?:async\s+)?def\s|class\s|(?:export\s+)?function\s|func\s|(?:pub\s+)?fn\s|"
    r"impl\s|interface\s|struct\s|@@\s|diff --git|\.\.\. eliding|Traceback|\w*(?:Error|Exception)\b|FAILED|ERROR)"
    r"|^[^\s:]++:\d++[:-]",  # grep -n hits: path:line:
)


def render_view(
    text: str,
    ref: ToolOutputRef,
    *,
    max_bytes: int,
    max_tokens: int,
    max_line_length: int,
    counter: TokenCounter,
    max_lines: int | None = None,
    marker_unit: str = "tokens",
    header: bool = False,
    name_tools: bool = True,
    secrets: SecretGuard | None = None,
) -> str:
    r"""Cut lines longer than ``max_line_length``, keep head and tail within both caps, and add the reading note.

    Line numbers in the markers are those the retrieval tools use (1-based, split on ``\n``). ``max_lines`` caps
    the lines kept; the omission marker also says ``…N tokens truncated…`` (``marker_unit="chars"``: ``…N chars
    truncated…``), and ``header`` puts ``Total output lines: X`` first (000 §Decision 3). With ``name_tools`` False
    (the agent was not given the retrieval tools) the notes say what was cut and how much, without telling the
    model to call a tool it does not have. Outputs of a few long lines (minified JSON, one-line API responses,
    base64) are cut by structure instead (see :mod:`contextfold.truncate.shape`): cutting them by lines would
    keep nothing. The omitted range gets an outline (definitions, elisions, errors with their line numbers).
    With ``secrets``, no cut (of a long line, an outline entry, a JSON string, the head or tail by characters) falls
    inside a secret: the piece would be recognised by nothing.
    """
    guard = cut_guard(secrets)
    lines = _CutLines(_split_lines(text), max_line_length, guard)
    lines.max_lines = max_lines
    byte_budget = max(0, max_bytes - VIEW_NOTE_RESERVE_BYTES)
    token_budget = max(0, max_tokens - VIEW_NOTE_RESERVE_TOKENS)
    few_long_lines = max_lines is None and is_few_long_lines(text, max_line_length)
    if few_long_lines:
        if secrets is not None:
            secrets.learn_text(text)  # (a JSON string is cut without its key: what the key says must be known)
        shaped = _json_view(text, ref, byte_budget, token_budget, counter, name_tools, guard)
        if shaped is not None:
            return shaped
    view = ""
    for _ in range(VIEW_MAX_SHRINKS):
        outline_tokens = int(token_budget * VIEW_OUTLINE_SHARE)
        outline_bytes = int(byte_budget * VIEW_OUTLINE_SHARE)
        head, tail = _head_tail(lines, byte_budget - outline_bytes, token_budget - outline_tokens, counter)
        if max_lines is None and (head + tail == 0 or (few_long_lines and head + tail < len(lines))):
            # Whole lines would leave out most of the output (or all of it): cut by characters instead.
            return _char_view(text, ref, byte_budget, token_budget, counter, name_tools, guard)
        outline = _outline(lines, head, len(lines) - tail, outline_bytes, outline_tokens, counter, guard)
        spent_bytes, spent_tokens = _outline_cost(outline, counter)
        if spent_bytes < outline_bytes or spent_tokens < outline_tokens:
            # The outline took less than its share (often nothing: plain logs): head and tail get the rest.
            # A wider head and tail only shrink the omitted range, so its outline can only take less again.
            head, tail = _head_tail(lines, byte_budget - spent_bytes, token_budget - spent_tokens, counter)
            outline = _outline(lines, head, len(lines) - tail, spent_bytes, spent_tokens, counter, guard)
        view = _assemble(lines, head, tail, ref, _omitted(lines, head, tail, marker_unit, counter), name_tools,
                         outline)
        if header:
            view = f"Total output lines: {len(lines)}\n{view}"
        if len(view.encode("utf-8", "surrogatepass")) <= max_bytes and counter.count(view) <= max_tokens:
            return view
        byte_budget = int(byte_budget * VIEW_SHRINK_FACTOR)
        token_budget = int(token_budget * VIEW_SHRINK_FACTOR)
    return view


class _CutLines:
    """The lines of an output, each cut at the line limit on first use (a huge output is never cut whole)."""

    def __init__(self, raw: list[str], limit: int, guard: Callable[[str, int, bool], int] | None = None) -> None:
        self.raw = raw
        self.limit = limit
        self.guard = guard
        self.max_lines: int | None = None
        self._cut: dict[int, tuple[str, int, int]] = {}
        # Running sums of the lines' bytes and tokens from the head (False) and from the tail (True): entry k is
        # the cost of the first k lines from that end. A render fits head and tail several times (outline share,
        # the rest, shrinking): each fit after the first is a bisection, not a walk (issue 22, plain turns).
        self._sums: dict[bool, tuple[list[int], list[int]]] = {False: ([0], [0]), True: ([0], [0])}

    def __len__(self) -> int:
        return len(self.raw)

    def line(self, i: int) -> str:
        return self.cost(i, None)[0]

    def cost(self, i: int, counter: TokenCounter | None) -> tuple[str, int, int]:
        """The cut line, its bytes and (when a counter is given) its tokens, each plus one for the newline."""
        hit = self._cut.get(i)
        if hit is None or (counter is not None and hit[2] < 0):
            # The same per-line cut (and marker) as truncate_text, one line at a time: a huge output is never
            # cut whole when only its head and tail are shown.
            line, _ = cap_lines(self.raw[i], self.limit, self.guard)
            tokens = counter.count(line) + 1 if counter is not None else -1
            hit = (line, len(line.encode("utf-8", "surrogatepass")) + 1, tokens)
            self._cut[i] = hit
        return hit

    def fit(self, from_tail: bool, most: int, byte_budget: int, token_budget: int,
            counter: TokenCounter) -> tuple[int, int, int]:
        """(lines, bytes, tokens) of the most lines from one end, at most ``most``, that fit both budgets.

        Lines are taken in order while both running sums stay within their budgets; a line's tokens are counted only
        once its bytes fit (the first line over a budget is the last one measured), as a walk would.
        """
        n = len(self.raw)
        spent_bytes, spent_tokens = self._sums[from_tail]  # (bytes may be known for one line more than tokens)
        most = max(0, min(most, n))
        cut, raw, limit = self._cut, self.raw, self.limit
        # (One pass measuring each line once, bytes then tokens, as cost() does: a render measures a few hundred.)
        while len(spent_tokens) <= most:
            k = len(spent_tokens) - 1
            if spent_bytes[k] > byte_budget or spent_tokens[k] > token_budget:
                break
            i = n - 1 - k if from_tail else k
            hit = cut.get(i)
            if hit is None:
                line = raw[i]
                if len(line) > limit:
                    line, _ = cap_lines(line, limit, self.guard)
                hit = cut[i] = (line, len(line.encode("utf-8", "surrogatepass")) + 1, -1)
            if len(spent_bytes) == k + 1:
                spent_bytes.append(spent_bytes[k] + hit[1])
            if spent_bytes[k + 1] > byte_budget:
                break
            if hit[2] < 0:
                hit = cut[i] = (hit[0], hit[1], counter.count(hit[0]) + 1)
            spent_tokens.append(spent_tokens[k] + hit[2])
        by_bytes = bisect_right(spent_bytes, byte_budget, 0, min(len(spent_bytes), most + 1)) - 1
        taken = bisect_right(spent_tokens, token_budget, 0, min(len(spent_tokens), by_bytes + 1)) - 1
        return taken, spent_bytes[taken], spent_tokens[taken]


def _split_lines(text: str) -> list[str]:
    # Split on "\n" only (a "\r" stays with its line), exactly as the store's line index counts lines.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _head_tail(lines: _CutLines, byte_budget: int, token_budget: int, counter: TokenCounter) -> tuple[int, int]:
    """How many lines fit at the head and at the tail (the tail never overlaps the head)."""
    n = len(lines)
    cap = n if lines.max_lines is None else min(n, lines.max_lines)
    head_cap = cap - cap // 2 if cap < n else n
    head, used_bytes, used_tokens = lines.fit(
        False, head_cap, int(byte_budget * VIEW_HEAD_SHARE), int(token_budget * VIEW_HEAD_SHARE), counter,
    )
    # The tail also gets whatever the head did not use.
    tail, _, _ = lines.fit(True, min(n - head, cap - head), byte_budget - used_bytes, token_budget - used_tokens,
                           counter)
    return head, tail


# Omitted parts up to this size are token-counted exactly for the marker; beyond it, estimated at 4 bytes a token.
MARKER_EXACT_BYTES = 1 << 20


def _omitted(lines: _CutLines, head: int, tail: int, unit: str, counter: TokenCounter) -> str:
    """``…N tokens truncated…`` (or chars) for the lines the view leaves out, or "" when none are."""
    gone = range(head, len(lines) - tail)
    if not gone:
        return ""
    if unit == "chars":
        return f"…{sum(len(lines.raw[i]) + 1 for i in gone):,} chars truncated…"
    size = sum(len(lines.raw[i]) + 1 for i in gone)
    if size > MARKER_EXACT_BYTES:
        return f"…~{size // 4:,} tokens truncated…"
    return f"…{counter.count(chr(10).join(lines.raw[i] for i in gone)):,} tokens truncated…"


_JSON_NOTE = "JSON shortened by structure: every key kept, long arrays and strings cut where marked"


def _json_view(text: str, ref: ToolOutputRef, byte_budget: int, token_budget: int, counter: TokenCounter,
               name_tools: bool, guard: Callable[[str, int, bool], int] | None = None) -> str | None:
    def fits(candidate: str) -> bool:
        nbytes = len(candidate.encode("utf-8", "surrogatepass"))
        return nbytes <= byte_budget and counter.count(candidate) <= token_budget

    body = shape_json(text, fits, guard)
    if body is None:
        return None
    return f"{body}\n{_note(ref, _JSON_NOTE, name_tools)}"


def _char_view(text: str, ref: ToolOutputRef, byte_budget: int, token_budget: int, counter: TokenCounter,
               name_tools: bool, guard: Callable[[str, int, bool], int] | None = None) -> str:
    body = cut_by_chars(text, max_tokens=token_budget, max_bytes=byte_budget, counter=counter, guard=guard)
    return f"{body}\n{_note(ref, 'middle cut by characters where marked', name_tools)}"


def _note(ref: ToolOutputRef, how: str | None = None, name_tools: bool = True) -> str:
    shown = f" ({how})" if how else ""
    if not name_tools:
        return (f"[tool output cut to fit the context: {ref.line_count:,} lines, {ref.byte_size:,} bytes in "
                f"full (ref={ref.id}){shown}; only what is shown here is available.]")
    return (
        f"[tool output cached as ref={ref.id}: {ref.line_count:,} lines, {ref.byte_size:,} bytes in full{shown}. "
        f'Read any part with tool_output_cache(ref_id="{ref.id}", offset=<line>, limit=<lines>); '
        f'search it with tool_output_cache_grep(pattern=<regex>, ref_id="{ref.id}").]'
    )


# A numbered listing's line: the padding before the number costs a token a line and says nothing.
_NUMBERED_LINE = re.compile(r"^[ \t]+(?=\d+[\t ])")
# SWE-agent's abbreviated file view replaces a body by this line, right after the line that opens it.
_ELISION = re.compile(r"^\s*(\d+)\s+\.\.\. eliding lines (\d+)-(\d+) \.\.\.\s*$")


def _outline(lines: _CutLines, start: int, stop: int, byte_budget: int, token_budget: int,
             counter: TokenCounter, guard: Callable[[str, int, bool], int] | None = None) -> list[str]:
    """Outline lines of the omitted range ``[start, stop)``, in order, within both budgets.

    Each entry is a matching line, its numbered-listing padding dropped and cut at :data:`OUTLINE_LINE_CHARS`. An
    elision right after the line that opens it joins that line (``769     def update(self, **kwargs): (lines
    770-786 elided)``): the name and both line numbers an agent pages to, for one entry. In huge ranges, the first
    entries that fit (measured: taking entries evenly across the range instead lost 10 of the 638 numbers later turns
    used in the SWE-agent sessions; agents page near what they read first). Only the start of each line is matched.
    """
    out: list[str] = []
    spent_bytes = spent_tokens = 0
    previous_number = -2  # line number of the last entry, when it was a numbered line that an elision may join
    for i in range(start, stop):
        raw = lines.raw[i]
        if not _OUTLINE.match(raw[:200]):
            continue
        line = _NUMBERED_LINE.sub("", raw.rstrip("\r").rstrip())
        elision = _ELISION.match(line)
        if elision and out and int(elision.group(1)) == previous_number + 1:
            joined = f"{out[-1]} (lines {elision.group(2)}-{elision.group(3)} elided)"
            extra_bytes = len(joined.encode("utf-8", "surrogatepass")) - len(out[-1].encode("utf-8", "surrogatepass"))
            extra_tokens = counter.count(joined) - counter.count(out[-1])
            if spent_bytes + extra_bytes > byte_budget or spent_tokens + extra_tokens > token_budget:
                break
            out[-1] = joined
            spent_bytes += extra_bytes
            spent_tokens += extra_tokens
            previous_number = -2
            continue
        if len(line) > OUTLINE_LINE_CHARS:
            line = line[: guard(line, OUTLINE_LINE_CHARS, True) if guard is not None else OUTLINE_LINE_CHARS] + "…"
        nbytes = len(line.encode("utf-8", "surrogatepass")) + 1
        ntokens = counter.count(line) + 1
        if spent_bytes + nbytes > byte_budget or spent_tokens + ntokens > token_budget:
            break
        out.append(line)
        spent_bytes += nbytes
        spent_tokens += ntokens
        number = line.split(None, 1)[0]
        previous_number = int(number) if number.isdigit() else -2
    return out


def _outline_cost(outline: list[str], counter: TokenCounter) -> tuple[int, int]:
    if not outline:
        return 0, 0
    return (sum(len(line.encode("utf-8", "surrogatepass")) + 1 for line in outline),
            sum(counter.count(line) + 1 for line in outline))


def _assemble(lines: _CutLines, head: int, tail: int, ref: ToolOutputRef, count_note: str = "",
              name_tools: bool = True, outline: list[str] | None = None) -> str:
    n = len(lines)
    parts = [lines.line(i) for i in range(head)]
    if head + tail < n:
        first, last = head + 1, n - tail
        follows = "; their outline (definitions, elisions, errors) follows" if outline else ""
        # The "[... lines A-B of N omitted; " prefix is what redaction recognises as a view note (redact.py).
        parts.append(
            f"[... lines {first}-{last} of {n} omitted; read them with "
            f'tool_output_cache(ref_id="{ref.id}", offset={first}){" " + count_note if count_note else ""}'
            f"{follows} ...]"
            if name_tools else f"[... lines {first}-{last} of {n} omitted; {count_note or 'not shown'}{follows} ...]"
        )
        if outline:
            parts.extend(outline)
            parts.append(f"[... end of the outline of lines {first}-{last} ...]")
    parts.extend(lines.line(i) for i in range(n - tail, n))
    if not name_tools:
        parts.append(f"[tool output cut to fit the context: {ref.line_count:,} lines, {ref.byte_size:,} bytes in "
                     f"full (ref={ref.id}); only the lines shown here are available.]")
        return "\n".join(parts)
    parts.append(
        f"[tool output cached as ref={ref.id}: {ref.line_count:,} lines, {ref.byte_size:,} bytes in full. "
        f'Read any part with tool_output_cache(ref_id="{ref.id}", offset=<line>, limit=<lines>); '
        f'search it with tool_output_cache_grep(pattern=<regex>, ref_id="{ref.id}").]'
    )
    return "\n".join(parts)
