"""Superseded reads: which tool outputs show a resource that a later call read again or changed.

A read of a file (or any resource: a reservation, a record) is *superseded* when a later call reads the same
resource over the same or a wider range, or when a later call edits it. Its output is then the stale or duplicate
copy: the first thing masking should take out of the view, before any older output that is still current.

What a call reads or edits is told by a :class:`ResourceRule` per tool: the argument(s) naming the resource, the
arguments giving a line range, and for multiplexed tools (``str_replace_editor``) the argument selecting the
operation. :data:`DEFAULT_RESOURCE_RULES` covers the common file tools; any tool can be given a rule of its own
(``policy.tools``). Pure: a function of the messages and the rules.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..messages import Message
from ..pairing import ToolPair, pair_list
from .resource_rule import ResourceRule

__all__ = [
    "DEFAULT_RESOURCE_RULES",
    "EDIT_COMMANDS",
    "END_OF_RESOURCE",
    "FILE_EDIT",
    "FILE_READ",
    "READ_COMMANDS",
    "Access",
    "ResourceRule",
    "access_of",
    "superseded_reads",
]

# The last line of a resource whose length is not known: a range ending here runs to the end.
END_OF_RESOURCE = float("inf")
# The argument names file tools use for the file (Claude Code ``file_path``, SWE-agent and most MCP servers ``path``).
_PATH_ARGUMENTS = ("path", "file_path", "filename", "file", "target_file")
# A [first, last] pair in one argument: SWE-agent's ``view_range`` (a list, or the text "[1, 50]").
_RANGE_ARGUMENTS = ("view_range", "line_range", "range", "lines")
_START_ARGUMENTS = ("start_line", "start", "offset", "line_number", "line")
_END_ARGUMENTS = ("end_line", "end")
_LIMIT_ARGUMENTS = ("limit", "num_lines", "count")
# What an edit replaced: str_replace_editor's old_str, Claude Code Edit's old_string; and the line an insert goes at.
_CHANGED_TEXT_ARGUMENTS = ("old_str", "old_string")
_CHANGED_LINE_ARGUMENTS = ("insert_line",)
# str_replace_editor (SWE-agent, Anthropic's text editor tool): which commands read and which change the file.
READ_COMMANDS = ("view",)
EDIT_COMMANDS = ("create", "str_replace", "insert", "undo_edit", "write", "edit", "append")
# Two integers in a text such as "[10, 60]", "10-60" or "10:60" (a model may quote a list); a minus sign only counts
# where no digit precedes it ("[1, -1]" runs to the end, "10-60" is a range).
_INTEGERS = re.compile(r"(?<!\d)-?\d+")


# The rules behind the defaults, reusable in a config (``resource: FILE_READ`` is not a thing: Python only).
FILE_READ = ResourceRule(key=_PATH_ARGUMENTS, range=_RANGE_ARGUMENTS, start=_START_ARGUMENTS, end=_END_ARGUMENTS,
                         limit=_LIMIT_ARGUMENTS)
FILE_EDIT = ResourceRule(key=_PATH_ARGUMENTS, access="edit", changed_text=_CHANGED_TEXT_ARGUMENTS,
                         changed_line=_CHANGED_LINE_ARGUMENTS)
_EDITOR = ResourceRule(key=_PATH_ARGUMENTS, command="command", reads=READ_COMMANDS, edits=EDIT_COMMANDS,
                       range=_RANGE_ARGUMENTS, changed_text=_CHANGED_TEXT_ARGUMENTS,
                       changed_line=_CHANGED_LINE_ARGUMENTS)

# Tool name (glob) -> rule, for the file tools of the common agents: SWE-agent (str_replace_editor view, open),
# Claude Code (Read, Write, Edit, MultiEdit), Anthropic's text editor tool, OpenHands, MCP filesystem servers.
DEFAULT_RESOURCE_RULES: Mapping[str, ResourceRule] = {
    "read_file": FILE_READ, "read": FILE_READ, "Read": FILE_READ, "view": FILE_READ, "view_file": FILE_READ,
    "cat": FILE_READ, "open": FILE_READ, "open_file": FILE_READ, "read_text_file": FILE_READ,
    "str_replace_editor": _EDITOR, "str_replace_based_edit_tool": _EDITOR, "text_editor": _EDITOR,
    "write_file": FILE_EDIT, "Write": FILE_EDIT, "edit_file": FILE_EDIT, "Edit": FILE_EDIT, "MultiEdit": FILE_EDIT,
    "create_file": FILE_EDIT, "str_replace": FILE_EDIT, "insert": FILE_EDIT,
}


@dataclass(frozen=True, slots=True)
class Access:
    """What one call does to a resource: ``kind`` (read or edit), the resource's ``key`` and the lines read.

    ``first``/``last`` span the lines read (1 and :data:`END_OF_RESOURCE` for the whole resource); ``exact`` holds
    the raw range arguments when they could not be read as numbers (such a read covers only an identical one). An
    edit may say what it changed: ``changed_text`` (the first non-blank line of the text it replaced) or
    ``changed_line``.
    """

    kind: Literal["read", "edit"]
    key: tuple[str, ...]
    first: float = 1
    last: float = END_OF_RESOURCE
    exact: str | None = None
    changed_text: str | None = None
    changed_line: int | None = None

    def covers(self, older: Access) -> bool:
        """Whether this read shows at least the lines ``older`` showed."""
        if self.exact is not None or older.exact is not None:
            return self.exact == older.exact and (self.first, self.last) == (older.first, older.last)
        return self.first <= older.first and self.last >= older.last


def _first(arguments: Mapping[str, Any], names: Sequence[str]) -> tuple[str, Any] | None:
    for name in names:
        value = arguments.get(name)
        if value is not None and value != "":
            return name, value
    return None


def _line(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _key_part(value: Any) -> str:
    if isinstance(value, str):
        text = value.strip()
        # "./src/a.py" and "src//a.py" name the same file as "src/a.py".
        return posixpath.normpath(text) if "/" in text else text
    return repr(value)


def _span(rule: ResourceRule, arguments: Mapping[str, Any]) -> tuple[float, float, str | None]:
    """(first, last, exact) of the lines a read call asks for."""
    pair = _first(arguments, rule.range)
    if pair is not None:
        name, value = pair
        numbers = ([_line(v) for v in value] if isinstance(value, list | tuple)
                   else [int(n) for n in _INTEGERS.findall(value)] if isinstance(value, str) else [])
        if len(numbers) == 2 and numbers[0] is not None and numbers[1] is not None:
            first, last = numbers[0], numbers[1]
            return max(1, first), END_OF_RESOURCE if last < 0 else last, None
        return 1, END_OF_RESOURCE, f"{name}={value!r}"
    start = _first(arguments, rule.start)
    end = _first(arguments, rule.end)
    limit = _first(arguments, rule.limit)
    if start is None and end is None and limit is None:
        return 1, END_OF_RESOURCE, None
    first_line = _line(start[1]) if start is not None else 1
    last_line = _line(end[1]) if end is not None else None
    count = _line(limit[1]) if limit is not None else None
    if first_line is None or (end is not None and last_line is None) or (limit is not None and count is None):
        raw = ",".join(f"{p[0]}={p[1]!r}" for p in (start, end, limit) if p is not None)
        return 1, END_OF_RESOURCE, raw
    first = max(1, first_line)
    if last_line is not None:
        return first, END_OF_RESOURCE if last_line < 0 else last_line, None
    if count is not None:
        return first, first + max(0, count) - 1, None
    if end is None and limit is None and start is not None and start[0] in ("line_number", "line"):
        # SWE-agent's `open path 120` shows a window around line 120: the same line shows the same window.
        return first, first, f"{start[0]}={first}"
    return first, END_OF_RESOURCE, None


def access_of(rule: ResourceRule, arguments: Any) -> Access | None:
    """What a call with ``arguments`` does to which resource under ``rule``.

    None when it names no resource, or (a multiplexed tool) its command neither reads nor edits.
    """
    if not isinstance(arguments, Mapping):
        return None
    kind: Literal["read", "edit"] = rule.access
    if rule.command is not None:
        command = arguments.get(rule.command)
        if command in rule.reads:
            kind = "read"
        elif command in rule.edits:
            kind = "edit"
        else:
            return None
    # Values only: Read's file_path and str_replace_editor's path name the same file.
    key = tuple(_key_part(arguments[name]) for name in rule.key
                if arguments.get(name) is not None and arguments.get(name) != "")
    if not key:
        return None
    if kind == "edit":
        text = _first(arguments, rule.changed_text)
        line = _first(arguments, rule.changed_line)
        first_line = next((ln.strip() for ln in text[1].splitlines() if ln.strip()), None) \
            if text is not None and isinstance(text[1], str) else None
        return Access("edit", key, changed_text=first_line, changed_line=_line(line[1]) if line is not None else None)
    first, last, exact = _span(rule, arguments)
    return Access("read", key, first, last, exact)


def _arguments(raw: str) -> Any:
    import json

    try:
        return json.loads(raw) if raw else {}
    except (ValueError, RecursionError):
        return None


# What a call's arguments access, by rule and raw arguments: every masking turn orders the whole view again, and
# parsing each call's JSON was most of it (issue 22, masking turns). Bounded: cleared when full, by entries and by
# the characters of the arguments it keeps (an edit tool's call carries a whole file: a long-lived process would
# otherwise keep closed sessions' files).
_ACCESS_MEMO_MAX = 8_192
_ACCESS_MEMO_CHARS = 8 * 1024 * 1024
_access_memo: dict[tuple[int, str], tuple[ResourceRule, Access | None]] = {}
_access_memo_chars = 0


def _access_of_call(rule: ResourceRule, raw: str) -> Access | None:
    """:func:`access_of` a call's raw ``arguments`` (remembered: the same rule and arguments access the same)."""
    global _access_memo_chars
    key = (id(rule), raw)
    known = _access_memo.get(key)
    if known is not None and known[0] is rule:  # (the rule itself is kept: an id is never taken for another's)
        return known[1]
    access = access_of(rule, _arguments(raw))
    if len(raw) > _ACCESS_MEMO_CHARS // 16:
        return access  # (parsed each time: one such call would push out everything else)
    if len(_access_memo) >= _ACCESS_MEMO_MAX or _access_memo_chars + len(raw) > _ACCESS_MEMO_CHARS:
        _access_memo.clear()
        _access_memo_chars = 0
    _access_memo[key] = (rule, access)
    _access_memo_chars += len(raw)
    return access


def _changed_by(edit: Access, read: Access, output: Message) -> bool:
    """Whether ``edit`` changed what the read with ``output`` shows."""
    if edit.changed_text is not None:
        return edit.changed_text in output.text
    if edit.changed_line is not None:
        return read.exact is None and read.first <= edit.changed_line <= read.last
    return True


def superseded_reads(messages: Sequence[Message], rule_for: Callable[[str], ResourceRule | None],
                     pairs: Sequence[ToolPair] | None = None) -> dict[int, int]:
    """``{index of a read's result: index of the call that superseded it}`` over ``messages``.

    A read is superseded by a later read of the same resource that covers its lines, or by a later edit of what
    it shows (the text an edit replaced in its output, the line it changed in its range, or any part when the edit
    does not say). A later read whose own output was cut at write time covers only an identical range (its view may not
    show the lines the older read showed). Calls are taken in order, parallel calls of one message left to right.

    Args:
        messages: The view.
        rule_for: Tool name -> its rule, or None for a tool that reads and edits nothing.
        pairs: ``pair_list(messages)``, when the caller has it.
    """
    fold = SupersededFold()
    fold.read(messages, rule_for, pair_list(messages) if pairs is None else pairs)
    return fold.out


class SupersededFold:
    """:func:`superseded_reads` read pair by pair, so that it can be kept over a view's prefix and taken further.

    ``out`` is what superseded what among the pairs read so far (``pairs`` of them). What reading the next pairs
    gives depends on these and on the messages they name only: kept over a prefix whose messages do not change, it
    is taken further by the pairs added after it (issue 22: a masking turn read every call of the view again).
    """

    __slots__ = ("_reads", "out", "pairs")

    def __init__(self) -> None:
        # resource -> (result index, access) of the reads still current, oldest first (each list replaced, never
        # changed in place: a copy shares them)
        self._reads: dict[tuple[str, ...], list[tuple[int, Access]]] = {}
        self.out: dict[int, int] = {}
        self.pairs = 0

    def copy(self) -> SupersededFold:
        """A fold that goes on from here without changing this one."""
        other = SupersededFold()
        other._reads, other.out, other.pairs = dict(self._reads), dict(self.out), self.pairs
        return other

    def read(self, messages: Sequence[Message], rule_for: Callable[[str], ResourceRule | None],
             pairs: Sequence[ToolPair]) -> None:
        """Take the fold on over ``pairs`` (the next ones of ``messages``' pairs, in order)."""
        reads, out = self._reads, self.out
        self.pairs += len(pairs)
        for pair in pairs:
            rule = rule_for(pair.name)
            if rule is None:
                continue
            call = next((c for c in messages[pair.call_index].tool_calls if c.id == pair.call_id), None)
            if call is None:
                continue
            access = _access_of_call(rule, call.arguments)
            if access is None:
                continue
            earlier = reads.get(access.key, [])
            if access.kind == "edit":
                still: list[tuple[int, Access]] = []
                for index, older in earlier:
                    if _changed_by(access, older, messages[index]):
                        out.setdefault(index, pair.call_index)
                    else:
                        still.append((index, older))  # another part of the file: what it shows is still current
                reads[access.key] = still
                continue
            result = pair.result_index
            cut = result is not None and messages[result].kind == "truncated"
            still = []
            for index, older in earlier:
                covered = access.covers(older) and (not cut or (access.first, access.last, access.exact)
                                                    == (older.first, older.last, older.exact))
                if covered:
                    out.setdefault(index, pair.call_index)
                else:
                    still.append((index, older))
            if result is not None and messages[result].role == "tool":
                still.append((result, access))
            reads[access.key] = still
