"""Pair integrity: one function per invariant, and :func:`normalize` composing them.

Every provider rejects a history in which a tool call has no result, or a result has no call. These functions
repair such histories without losing anything the model needs, and :func:`check_messages` rejects input that
cannot be repaired (an unknown role, a tool result without an id, arguments that are not JSON) with the message
index and the field named.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from types import MappingProxyType

from .errors import InvalidHistory
from .messages import ROLES, DocumentPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart

__all__ = [
    "ABORTED_OUTPUT_TEXT",
    "BOUNDARY_KIND",
    "CONTINUATION_TEXT",
    "ToolPair",
    "check_messages",
    "drop_empty_messages",
    "ensure_call_outputs_present",
    "ensure_leading_user",
    "for_summarizer",
    "move_outputs_after_calls",
    "normalize",
    "pair_list",
    "partner_indices",
    "remove_duplicate_calls",
    "remove_messages",
    "remove_orphan_outputs",
    "safe_split_points",
    "strip_trailing_tool_calls",
    "tool_pairs",
    "validate",
]

# What a message's content tuple may hold, with the fields of each that hold text (None allowed for the optional).
_PARTS = (TextPart, ImagePart, DocumentPart, ThinkingPart, UnknownPart)
_PART_TEXTS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {
    TextPart: (("text",), ()),
    ThinkingPart: (("text",), ("signature", "encrypted")),
    ImagePart: ((), ("url", "data", "media_type", "detail")),
    DocumentPart: ((), ("url", "data", "file_id", "media_type", "title")),
    UnknownPart: ((), ()),
}


# What the model reads where a tool call never got its output (the agent crashed, or the call was interrupted).
ABORTED_OUTPUT_TEXT = "aborted: no output was recorded for this tool call"
# Anthropic and Gemini reject a conversation that opens with the assistant; this stands in for what was removed.
CONTINUATION_TEXT = "[earlier conversation compacted; continuing]"
# meta["kind"] of a message holding a provider's compaction item (contextfold.provider_context.boundary): the
# conversation may open with it, since it stands for everything before it (a user message there would be ignored
# by Anthropic and would push the compaction block off the head of the conversation, which it rejects).
BOUNDARY_KIND = "provider_compaction"

_PINNED_ROLES = frozenset({"system", "developer"})


# -- reading pairs -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolPair:
    """One tool call and where its result is (None when it has none)."""

    call_id: str
    name: str
    call_index: int
    result_index: int | None


def pair_list(messages: Sequence[Message]) -> list[ToolPair]:
    """Every tool call in order, paired with its result.

    A result answers the earliest call before it with the same id that is still unanswered. Agents reuse ids
    across turns (tau-bench's gpt-4o sessions do, and OpenAI accepts it), so an id alone does not name a call.
    """
    calls: list[tuple[str, str, int]] = []
    results: list[int | None] = []
    open_calls: dict[str, list[int]] = {}  # call id -> positions in ``calls`` still waiting for a result
    for i, m in enumerate(messages):
        if m.role == "assistant":
            for call in m.tool_calls:
                open_calls.setdefault(call.id, []).append(len(calls))
                calls.append((call.id, call.name, i))
                results.append(None)
        elif m.role == "tool" and m.tool_call_id is not None:
            waiting = open_calls.get(m.tool_call_id)
            if waiting:
                results[waiting.pop(0)] = i
    # (Built once at the end: a dataclass replace() per answered call cost more than the pairing itself.)
    return list(map(make_pair, *zip(*calls, strict=True), results)) if calls else []


def make_pair(call_id: str, name: str, call_index: int, result_index: int | None) -> ToolPair:
    """``ToolPair(call_id, name, call_index, result_index)``, made slot by slot.

    The frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``: half of building the
    ~49,000 pairs of a 100,000-message view (issue 22; see ``Message._copy``, made the same way).
    """
    pair: ToolPair = _new_pair(ToolPair)
    _set_call_id(pair, call_id)
    _set_name(pair, name)
    _set_call_index(pair, call_index)
    _set_result_index(pair, result_index)
    return pair


# The slots of a ToolPair, written directly by make_pair (a frozen dataclass refuses setattr; its slots do not).
_PAIR_FIELDS = ("call_id", "name", "call_index", "result_index")
if tuple(f.name for f in fields(ToolPair)) != _PAIR_FIELDS:  # (a new field must be set by make_pair too)
    raise AssertionError("make_pair is out of date with ToolPair's fields")
_new_pair = object.__new__
_set_call_id, _set_name, _set_call_index, _set_result_index = (getattr(ToolPair, name).__set__ for name in _PAIR_FIELDS)


def tool_pairs(messages: Sequence[Message]) -> dict[str, tuple[int, int | None]]:
    """Map each tool call to (index of the calling assistant message, index of its result or None).

    The key is the call id; a reused id gets ``"<id>#<n>"`` for its n-th reuse, so every call has its entry.
    """
    out: dict[str, tuple[int, int | None]] = {}
    # The next suffix to try per id: counting up from 1 for every reuse made a history that reuses few ids (SWE-agent
    # sessions repeated, 100,000 messages) quadratic.
    next_suffix: dict[str, int] = {}
    for pair in pair_list(messages):
        key = pair.call_id
        if key in out:
            n = next_suffix.get(pair.call_id, 1)
            key = f"{pair.call_id}#{n}"
            while key in out:  # (an id that itself looks like "<id>#<n>")
                n += 1
                key = f"{pair.call_id}#{n}"
            next_suffix[pair.call_id] = n + 1
        out[key] = (pair.call_index, pair.result_index)
    return out


def partner_indices(messages: Sequence[Message], index: int) -> set[int]:
    """Indices of the messages that must go when ``messages[index]`` goes.

    An assistant message's partners are its results; a result's partner is the assistant message that called it.
    """
    m = messages[index]
    if m.role not in ("assistant", "tool"):
        return set()
    partners: set[int] = set()
    for pair in pair_list(messages):
        if pair.call_index == index and pair.result_index is not None:
            partners.add(pair.result_index)
        elif pair.result_index == index:
            partners.add(pair.call_index)
    return partners


def safe_split_points(messages: Sequence[Message]) -> list[int]:
    """Indices ``i`` (0..len) where ``messages[:i]`` and ``messages[i:]`` separate no tool call from its result."""
    n = len(messages)
    # unsafe[i] is true when some pair (call c, result r) has c < i <= r.
    depth = [0] * (n + 2)
    for pair in pair_list(messages):
        if pair.result_index is not None:
            depth[pair.call_index + 1] += 1
            depth[pair.result_index + 1] -= 1
    points: list[int] = []
    running = 0
    for i in range(n + 1):
        running += depth[i]
        if running == 0:
            points.append(i)
    return points


# -- checking input ------------------------------------------------------------------------------------------------


def check_messages(messages: Iterable[object], *, start: int = 0) -> list[Message]:
    """Reject what cannot be repaired: wrong types, unknown roles, results without ids, non-JSON arguments.

    ``start`` offsets the index named in errors (the position of the first message in the whole history).
    """
    checked: list[Message] = []
    # The messages checked in this call, by id: a repeated history holds each message object many times (issue 22).
    seen: dict[int, Message] = {}
    # The origins (Message._origin) of the copies checked in this call: a copy of the same origin has the very
    # role, content, call id and calls objects, and only its meta differs, which is not checked here (issue 22:
    # a manager's view of a repeated history holds ~30 copies of each message, each a distinct object).
    origins: dict[int, Message] = {}
    for offset, m in enumerate(messages):
        known = seen.get(id(m))
        if known is not None:  # (this very object, immutable, checked above and kept alive by ``checked``)
            checked.append(known)
            continue
        i = start + offset
        if not isinstance(m, Message):
            raise InvalidHistory(f"expected a Message, got {type(m).__name__}", index=i)
        origin = m._origin
        if origin is not None:
            if origins.get(id(origin)) is origin:  # (kept alive by the copies in ``checked``)
                checked.append(m)
                continue
            origins[id(origin)] = origin
        if m.role not in ROLES:
            raise InvalidHistory(f"unknown role {m.role!r} (expected one of {sorted(ROLES)})", index=i, field="role")
        if not isinstance(m.content, str | tuple):
            raise InvalidHistory(f"content must be text or parts, got {type(m.content).__name__}", index=i,
                                 field="content")
        if type(m.content) is tuple:
            _check_parts(m.content, i)
        if m.name is not None:
            _check_text(m.name, i, "name")
        if m.role == "tool" and not m.tool_call_id:
            raise InvalidHistory("tool result has no tool_call_id", index=i, field="tool_call_id")
        call_id = m.tool_call_id  # (an int went to the provider as one: every API takes a string, red team 19)
        if call_id is not None and type(call_id) is not str:
            _check_text(call_id, i, "tool_call_id")
        if m.tool_calls and m.role != "assistant":
            raise InvalidHistory(f"only assistant messages carry tool calls, not {m.role}", index=i,
                                 field="tool_calls")
        for k, call in enumerate(m.tool_calls):
            _check_call(call, i, k)
        checked.append(m)
        seen[id(m)] = m
    return checked


def _check_parts(parts: tuple[object, ...], index: int) -> None:
    # (A provider's block where a part belongs passed, went into the view, and failed every later call: red team 17.)
    for k, part in enumerate(parts):
        if not isinstance(part, _PARTS):
            raise InvalidHistory(f"expected a content part (TextPart, ImagePart, ...), got {type(part).__name__}",
                                 index=index, field=f"content[{k}]")
        required, optional = next(texts for kind, texts in _PART_TEXTS.items() if isinstance(part, kind))
        for name in required:
            _check_text(getattr(part, name), index, f"content[{k}].{name}")
        for name in optional:
            value = getattr(part, name)
            if value is not None:
                _check_text(value, index, f"content[{k}].{name}")
        for name in ("data", "extra") if isinstance(part, UnknownPart) else ("extra",):
            _check_mapping(getattr(part, name), index, f"content[{k}].{name}")
        if part.cache_control is not None:
            _check_mapping(part.cache_control, index, f"content[{k}].cache_control")


def _check_mapping(value: object, index: int, field: str) -> None:
    kind = type(value)  # (a read-only view or a dict told without the ABC's isinstance: one per call of a bulk add)
    if kind is not MappingProxyType and kind is not dict and not isinstance(value, Mapping):
        raise InvalidHistory(f"must be a mapping, got {type(value).__name__}", index=index, field=field)


def _check_text(value: object, index: int, field: str) -> None:
    if not isinstance(value, str):
        raise InvalidHistory(f"must be a string, got {type(value).__name__}", index=index, field=field)


def _check_call(call: object, index: int, k: int) -> None:
    where = f"tool_calls[{k}]"
    if not isinstance(call, ToolCall):
        raise InvalidHistory(f"expected a ToolCall, got {type(call).__name__}", index=index, field=where)
    if not call.id:
        raise InvalidHistory("tool call has no id", index=index, field=f"{where}.id")
    if type(call.id) is not str:  # (the decoders take strings only; a Message built in code may not)
        _check_text(call.id, index, f"{where}.id")
    if not call.name:
        raise InvalidHistory(f"tool call {call.id!r} has no name", index=index, field=f"{where}.name")
    _check_text(call.name, index, f"{where}.name")
    _check_mapping(call.extra, index, f"{where}.extra")
    if not isinstance(call.arguments, str):
        raise InvalidHistory("arguments must be a JSON string", index=index, field=f"{where}.arguments")
    if call.arguments and _VALID_ARGUMENTS.get(id(call.arguments)) is not call.arguments:
        try:
            value = json.loads(call.arguments)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser's own limit
            raise InvalidHistory(f"arguments of {call.id!r} are not valid JSON ({exc})", index=index,
                                 field=f"{where}.arguments") from None
        if not isinstance(value, dict):
            # A tool's arguments are its parameters object; Anthropic and Gemini take nothing else, so such a call
            # would make the view unsendable there.
            raise InvalidHistory(f"arguments of {call.id!r} must be a JSON object (the tool's parameters), got "
                                 f"{type(value).__name__}", index=index, field=f"{where}.arguments")
        _remember_valid(call.arguments)


# Argument texts found to be a JSON object, by the string object (issue 22): the copies of a call in a repeated
# history share it, and each was parsed again at add and at every compaction. Short texts only, and few: the entry
# keeps its string alive (so its id cannot name another string).
_VALID_ARGUMENTS: dict[int, str] = {}
_VALID_MAX_ENTRIES = 4_096
_VALID_MAX_CHARS = 1_000


def _remember_valid(arguments: str) -> None:
    if len(arguments) > _VALID_MAX_CHARS:
        return
    if len(_VALID_ARGUMENTS) >= _VALID_MAX_ENTRIES:
        _VALID_ARGUMENTS.clear()  # (a new start, not an eviction order: a bulk add refills it with what it repeats)
    _VALID_ARGUMENTS[id(arguments)] = arguments


# -- invariants, one function each ---------------------------------------------------------------------------------


def remove_duplicate_calls(messages: Sequence[Message], seen: Iterable[str] = ()) -> list[Message]:
    """Drop a tool call that repeats an id of another call in the same message: no result could tell them apart.

    Ids reused in later turns are fine (see :func:`pair_list`). ``seen`` is accepted for compatibility and unused.
    """
    del seen
    out: list[Message] = []
    for m in messages:
        if m.role == "assistant" and len(m.tool_calls) > 1:
            ids: set[str] = set()
            calls = []
            for c in m.tool_calls:
                if c.id not in ids:
                    ids.add(c.id)
                    calls.append(c)
            if len(calls) != len(m.tool_calls):
                m = replace(m, tool_calls=tuple(calls))
        out.append(m)
    return out


def remove_orphan_outputs(messages: Sequence[Message]) -> list[Message]:
    """Drop tool results that answer no earlier call (including a second result for an answered call)."""
    return _remove_orphan_outputs(messages, pair_list(messages))[0]


def _remove_orphan_outputs(messages: Sequence[Message], pairs: list[ToolPair]) -> tuple[list[Message], bool]:
    """:func:`remove_orphan_outputs` given ``pair_list(messages)``, and whether it removed anything."""
    answering = {p.result_index for p in pairs if p.result_index is not None}
    out = [m for i, m in enumerate(messages) if m.role != "tool" or i in answering]
    return out, len(out) != len(messages)


def move_outputs_after_calls(messages: Sequence[Message]) -> list[Message]:
    """Place every result right after the assistant message that called it, in the order of the calls.

    Providers require the results of one assistant turn to follow it before any other message.
    """
    return _move_outputs_after_calls(messages, pair_list(messages))


def _move_outputs_after_calls(messages: Sequence[Message], pairs: list[ToolPair]) -> list[Message]:
    results_of: dict[int, list[int]] = {}
    placed: set[int] = set()
    for pair in pairs:
        if pair.result_index is not None:
            results_of.setdefault(pair.call_index, []).append(pair.result_index)
            placed.add(pair.result_index)
    out: list[Message] = []
    for i, m in enumerate(messages):
        if i in placed:
            continue
        out.append(m)
        for r in results_of.get(i, ()):
            out.append(messages[r])
    return out


def ensure_call_outputs_present(messages: Sequence[Message]) -> list[Message]:
    """Add a synthetic "aborted" result, in call order, right after every call that has none.

    Expects results already placed after their calls (:func:`move_outputs_after_calls`).
    """
    out: list[Message] = []
    i = 0
    n = len(messages)
    while i < n:
        m = messages[i]
        out.append(m)
        i += 1
        if m.role != "assistant" or not m.tool_calls:
            continue
        group: dict[str, Message] = {}
        while i < n and messages[i].role == "tool":
            group.setdefault(messages[i].tool_call_id or "", messages[i])
            i += 1
        for call in m.tool_calls:
            result = group.pop(call.id, None)
            if result is None:
                result = Message("tool", ABORTED_OUTPUT_TEXT, tool_call_id=call.id, name=call.name,
                                 meta={"kind": "aborted_output"})
            out.append(result)
        out.extend(group.values())  # results of other turns; remove_orphan_outputs runs first, so normally none
    return out


def drop_empty_messages(messages: Sequence[Message]) -> list[Message]:
    """Drop user and assistant messages with neither content nor tool calls (Anthropic rejects them)."""
    return [
        m
        for m in messages
        if m.role not in ("user", "assistant") or m.tool_calls or _has_content(m)
    ]


def ensure_leading_user(messages: Sequence[Message]) -> list[Message]:
    """Insert a short user message when the conversation would open with the assistant or a tool result.

    A provider compaction item may open it: it stands for everything before it.
    """
    for i, m in enumerate(messages):
        if m.role in _PINNED_ROLES:
            continue
        if m.role == "user" or m.kind == BOUNDARY_KIND:
            return list(messages)
        marker = Message("user", CONTINUATION_TEXT, meta={"kind": "placeholder"})
        return [*messages[:i], marker, *messages[i:]]
    return list(messages)


def strip_trailing_tool_calls(messages: Sequence[Message]) -> list[Message]:
    """Reduce a trailing assistant message with tool calls to its text, or drop it when it has none.

    Used when preparing summarizer input: the calls are still running, and their results do not exist yet.
    """
    if not messages or messages[-1].role != "assistant" or not messages[-1].tool_calls:
        return list(messages)
    last = messages[-1]
    text = last.text
    if not text.strip():
        return list(messages[:-1])
    return [*messages[:-1], replace(last, content=text, tool_calls=())]


def remove_messages(messages: Sequence[Message], indices: Iterable[int]) -> list[Message]:
    """Remove ``indices`` and their partners.

    An assistant message's results go with it; a removed result takes its call out of the assistant message
    (the message itself goes when nothing else is left in it).
    """
    n = len(messages)
    drop = {i for i in indices if 0 <= i < n}
    pairs = pair_list(messages)
    for pair in pairs:  # a removed assistant message takes all its results with it
        if pair.call_index in drop and pair.result_index is not None:
            drop.add(pair.result_index)
    dropped_calls: dict[int, list[int]] = {}  # assistant index -> positions (in its calls) to remove
    position: dict[int, int] = {}
    for pair in pairs:
        k = position.get(pair.call_index, 0)
        position[pair.call_index] = k + 1
        if pair.result_index in drop and pair.call_index not in drop:
            dropped_calls.setdefault(pair.call_index, []).append(k)
    out: list[Message] = []
    for i, m in enumerate(messages):
        if i in drop:
            continue
        gone = dropped_calls.get(i)
        if gone:
            calls = tuple(c for k, c in enumerate(m.tool_calls) if k not in gone)
            if not calls and not _has_content(m):
                continue
            m = replace(m, tool_calls=calls)
        out.append(m)
    return out


# -- composition ---------------------------------------------------------------------------------------------------


def normalize(messages: Sequence[Message], *, opening: bool = True, seen_call_ids: Iterable[str] = ()) -> list[Message]:
    """Return a history every provider accepts. Idempotent; runs before every model call.

    ``opening=False`` and ``seen_call_ids`` normalize a continuation: ``messages`` follow an already normalized
    prefix whose calls (``seen_call_ids``) are all answered, so the manager need not re-read the whole history.

    Invariants, applied in this order:

    0. Call ids are unique within a message: a call repeating one is dropped.
    1. No orphan results: a result whose call does not precede it, or a second result for one call, is dropped.
    2. Results follow their calls: each result moves right after the assistant message that called it.
    3. Every call has a result: a synthetic "aborted" result is added right after a call that has none.
    4. No empty turns: user and assistant messages with no content and no calls are dropped.
    5. The conversation opens with the user (after system/developer messages).

    Thinking blocks live inside the assistant message that carries the calls, so they move and stay with them.
    """
    out = remove_duplicate_calls(messages, seen_call_ids)
    pairs = pair_list(out)
    out, removed = _remove_orphan_outputs(out, pairs)
    out = _move_outputs_after_calls(out, pair_list(out) if removed else pairs)  # (pair once when nothing went)
    out = ensure_call_outputs_present(out)
    out = drop_empty_messages(out)
    return ensure_leading_user(out) if opening else out


def for_summarizer(messages: Sequence[Message]) -> list[Message]:
    """The history as a summarizer should read it: in-flight calls reduced to text, then normalized."""
    return normalize(strip_trailing_tool_calls(messages))


def validate(messages: Sequence[Message], format: str) -> None:
    """Raise :class:`InvalidHistory` when ``format``'s API would reject ``messages``."""
    # formats import this module's neighbours; import late to stay acyclic
    from .formats import get_format  # type: ignore[attr-defined,unused-ignore]

    wire = get_format(format)
    wire.validate(wire.encode(list(messages)))


def _has_content(m: Message) -> bool:
    if isinstance(m.content, str):
        return bool(m.content.strip())
    return any(not (p.type == "text" and not getattr(p, "text", "").strip()) for p in m.content)
