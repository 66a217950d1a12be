"""Helpers shared by the wire formats: strict field access, JSON checks and the round-trip bookkeeping.

Every decoder keeps what it does not model in an ``extra`` mapping so that ``encode(decode(x)) == x``. Those keys
belong to the format they came from (a Responses item ``status`` means nothing to Anthropic, and an API rejects
keys it does not know), so the decoder tags them with its format under :data:`WIRE_KEY`, together with *hints*:
the few facts about the original dict the model cannot hold (``content: null`` versus ``""``, a key that was
absent, the order of interleaved blocks). An encoder passes extras through and applies hints only when the tag
names its own format; extras written by hand (no tag) are passed through by every format.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any, cast

from ..errors import InvalidHistory
from ..messages import EMPTY, ToolCall, freeze

__all__ = [
    "MAX_NESTING",
    "WIRE_KEY",
    "apply_hints",
    "as_items",
    "check_nesting",
    "data_url",
    "empty_hints",
    "expect_list",
    "expect_mapping",
    "expect_str",
    "json_arguments",
    "make_extra",
    "parse_data_url",
    "placeholder",
    "plain",
    "role_of",
    "split_extra",
    "type_name",
]

# Reserved key inside ``extra`` holding ``{"format": NAME, **hints}``; never sent to a provider.
WIRE_KEY = "_wire"
# Hint on a ToolCall (and its output) decoded from a Responses custom tool's items (free-form text input).
CUSTOM_HINT = "custom"
# The key of the arguments object holding a custom tool's free-form input.
CUSTOM_INPUT_KEY = "input"
# The Responses item types that call a tool (a function, or a custom tool taking free-form text): the caller's
# calls wherever replies are classified.
RESPONSES_CALL_TYPES = frozenset({"function_call", "custom_tool_call"})

_DATA_URL = re.compile(r"^data:(?P<media>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)


# Containers nested deeper than this in one message are refused: real messages stay under ~20 levels, and every
# recursive walk (freezing, hashing, redaction, JSON encoding) must stay far from Python's recursion limit (1000).
MAX_NESTING = 128


# What nests: the level-by-level pass and the walk with links agree on it.
_CONTAINERS = (dict, list, tuple, Mapping)

# (parent's link, whether the key is a mapping key rather than a list index, the key or index).
_PathLink = tuple[Any, bool, Any]


# How much of the offending field's path an error shows (the start names the message part it is in).
_SHOWN_PATH_CHARS = 60


def check_nesting(value: Any, *, index: int | None = None, limit: int = MAX_NESTING) -> None:
    """Raise :class:`InvalidHistory` naming the field where ``value`` nests containers deeper than ``limit``.

    Iterative, so that the check itself cannot hit the recursion limit it guards. A node is pushed with a link to
    its parent's link and its own key, not with its path: building every node's path string would cost the path's
    length per sibling (quadratic in the input for a deep chain of long keys with many children at the bottom). The
    path is spelled out only for the node that is refused.

    First the containers are taken level by level, without links (~5x cheaper: every ``add()`` checks each item, the
    proxy each request body); the walk with links runs only when a level at ``limit`` holds a container, to name it.
    """
    level: list[Any] = [value] if isinstance(value, _CONTAINERS) else []
    for _ in range(limit):
        if not level:
            return
        # (texts, most leaves, are passed by before Mapping's slower check; dicts before it too)
        level = [child for container in level
                 for child in (container.values() if isinstance(container, dict | Mapping) else container)
                 if not isinstance(child, str) and isinstance(child, _CONTAINERS)]
    if not level:
        return
    stack: list[tuple[Any, _PathLink | None, int]] = [(value, None, 0)]
    while stack:
        item, link, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[tuple[_PathLink, Any]] = (((link, True, k), v) for k, v in item.items())
        elif isinstance(item, list | tuple):
            children = (((link, False, i), v) for i, v in enumerate(item))
        else:
            continue
        if depth >= limit:
            path = _spell_path(link, _SHOWN_PATH_CHARS)
            shown = path if len(path) <= _SHOWN_PATH_CHARS else path[:_SHOWN_PATH_CHARS] + "…"
            raise InvalidHistory(f"nested deeper than {limit} levels", index=index, field=shown or None)
        stack.extend((child, child_link, depth + 1) for child_link, child in children)


def _spell_path(link: _PathLink | None, cap: int) -> str:
    """The dotted path (``a.b[2].c``) a chain of links leads to, root first; cut after ``cap + 1`` characters.

    The cut keeps a refusal of huge keys cheap; the caller only shows the first ``cap`` characters anyway.
    """
    steps: list[tuple[bool, Any]] = []
    while link is not None:
        link, is_key, key = link
        steps.append((is_key, key))
    path = ""
    for is_key, key in reversed(steps):
        step = str(key)[: cap + 1]
        path = (f"{path}.{step}" if path else step) if is_key else f"{path}[{step}]"
        if len(path) > cap:
            return path[: cap + 1]
    return path


def json_problem(exc: ValueError | RecursionError) -> str:
    """What ``json.loads`` failed on, in words that name the cause (not Python's internals)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
    if isinstance(exc, RecursionError):
        return "invalid JSON: arrays or objects nested too deeply to read"
    digits = re.search(r"has (\d+) digits", str(exc))
    if digits:  # Python refuses to convert integers this long (a denial-of-service guard)
        return f"invalid JSON: a number with {digits.group(1)} digits (at most {sys.get_int_max_str_digits()})"
    return f"invalid JSON: {exc}"


def role_of(raw: Mapping[str, Any]) -> Any:
    """``raw["role"]`` when it is a string or absent; any other JSON value as ``"<its type>"``.

    The decoders compare the role with sets of names; an object or a list there must reach their "unknown role"
    error, not fail to hash.
    """
    role = raw.get("role")
    return role if role is None or isinstance(role, str) else f"<{type_name(role)}>"


def type_name(value: Any) -> str:
    """The JSON name of ``value``'s type, for messages a user who wrote JSON understands."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def expect_mapping(value: Any, index: int, field: str | None) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an :class:`InvalidHistory` naming ``field`` of item ``index``."""
    if not isinstance(value, Mapping):
        raise InvalidHistory(f"expected an object, got {type_name(value)}", index=index, field=field)
    return cast(Mapping[str, Any], value)


def expect_str(value: Any, index: int, field: str, *, nonempty: bool = False) -> str:
    """``value`` if it is a string (non-empty when asked), else an :class:`InvalidHistory`."""
    if not isinstance(value, str):
        raise InvalidHistory(f"expected a string, got {type_name(value)}", index=index, field=field)
    if nonempty and not value:
        raise InvalidHistory("must not be empty", index=index, field=field)
    return value


def expect_list(value: Any, index: int, field: str) -> list[Any]:
    """``value`` if it is a JSON array, else an :class:`InvalidHistory`."""
    if not isinstance(value, list | tuple):
        raise InvalidHistory(f"expected an array, got {type_name(value)}", index=index, field=field)
    return list(value)


def json_arguments(value: Any, index: int, field: str, *, allow_empty: bool) -> str:
    """``value`` if it is a string holding JSON (or ``""`` when ``allow_empty``), else an error."""
    text = expect_str(value, index, field)
    if allow_empty and text == "":
        return text
    try:
        json.loads(text)
    except (ValueError, RecursionError) as exc:
        reason = exc.args[0] if isinstance(exc, ValueError) else "arrays or objects nested too deeply to read"
        raise InvalidHistory(f"arguments are not valid JSON ({reason})", index=index, field=field) from None
    return text


def as_items(items: Iterable[Any]) -> list[Mapping[str, Any]]:
    """The items as a list of mappings; anything else is an error naming its index."""
    if isinstance(items, Mapping | str | bytes):
        raise InvalidHistory(f"expected a list of messages, got {type_name(items)}")
    out = []
    for index, item in enumerate(items):
        out.append(expect_mapping(item, index, None))
    return out


def plain(value: Any) -> Any:
    """A deep copy of ``value`` made of plain dicts and lists, so callers never share state with a Message."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def make_extra(
    fmt: str, raw: Mapping[str, Any], modelled: Iterable[str], hints: Mapping[str, Any] | None = None
) -> Mapping[str, Any]:
    """The ``extra`` of a decoded object: the keys of ``raw`` not in ``modelled``, tagged with ``fmt``."""
    skip = set(modelled)
    rest = {k: plain(v) for k, v in raw.items() if k not in skip}
    if not rest and not hints:
        return EMPTY
    rest[WIRE_KEY] = {"format": fmt, **(hints or {})}
    return freeze(rest)


def split_extra(extra: Mapping[str, Any], fmt: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """What an encoder for ``fmt`` sends from ``extra`` (pass-through keys) and the hints it may apply.

    Extras decoded from another format are dropped: that provider's keys would be rejected here.
    """
    if not extra:
        return {}, {}
    wire = extra.get(WIRE_KEY)
    if isinstance(wire, Mapping):
        if wire.get("format") != fmt:
            return {}, {}
        hints = {k: v for k, v in wire.items() if k != "format"}
    else:
        hints = {}
    return {k: plain(v) for k, v in extra.items() if k != WIRE_KEY}, hints


def parse_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a ``data:`` URL, or None when ``url`` is not exactly that shape."""
    match = _DATA_URL.match(url)
    if match is None:
        return None
    return match.group("media"), match.group("data")


def data_url(media_type: str, data: str) -> str:
    """The ``data:`` URL :func:`parse_data_url` reads back."""
    return f"data:{media_type};base64,{data}"


_MISSING: Any = object()


def _is_empty(value: Any) -> bool:
    return value is _MISSING or value is None or value == "" or value == []


def empty_hints(raw: Mapping[str, Any], canonical: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """Hints recording how ``raw`` spelled an empty value that the model holds as ``""``/``()``/None.

    Only empty values are recorded (``null`` versus ``""``, a key left out): a non-empty value is the model's
    business, and a hint must never overwrite content that was edited after decoding.
    """
    hints: dict[str, Any] = {}
    for key in keys:
        have = raw.get(key, _MISSING)
        want = canonical.get(key, _MISSING)
        if have is not _MISSING and want is not _MISSING and type(have) is type(want) and have == want:
            continue
        if have is _MISSING and want is _MISSING:
            continue
        if have is _MISSING:
            hints.setdefault("absent", []).append(key)
        elif _is_empty(have):
            hints.setdefault("raw", {})[key] = plain(have)
    return hints


def apply_hints(encoded: dict[str, Any], hints: Mapping[str, Any], *, constant: Iterable[str] = ()) -> None:
    """Give ``encoded`` back the empty spellings recorded by :func:`empty_hints` (where still empty).

    ``constant`` names keys whose canonical value is fixed (e.g. ``type: "function"``), so absence is restored
    whatever that value is.
    """
    fixed = set(constant)
    for key in hints.get("absent", ()):
        if key in fixed or _is_empty(encoded.get(key, _MISSING)):
            encoded.pop(key, None)
    for key, value in hints.get("raw", {}).items():
        if _is_empty(encoded.get(key, _MISSING)):
            encoded[key] = plain(value)


def placeholder(kind: str, fmt: str) -> str:
    """The text that stands in for a part the target format cannot carry, so the gap stays visible."""
    return f"[{kind} not representable in {fmt}]"


def custom_input(arguments: str) -> str:
    """A custom tool's free-form input from a call's ``arguments``: the ``input`` of ``{"input": ...}``.

    Arguments edited into another shape (a redactor's, a truncation's, another format's call marked custom) are
    free-form text too: sent as they are.
    """
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    if isinstance(parsed, dict) and len(parsed) == 1 and isinstance(parsed.get(CUSTOM_INPUT_KEY), str):
        return parsed[CUSTOM_INPUT_KEY]  # type: ignore[no-any-return]
    return arguments


def sent_arguments(call: ToolCall) -> str:
    """What a call's arguments are on the wire: a custom tool's free-form text, else the JSON arguments.

    A Responses custom tool call holds its input as ``{"input": text}``; the model reads (and is billed for) the
    text, not its JSON escaping (a quote-heavy patch counted +27% escaped).
    """
    wire = call.extra.get(WIRE_KEY) if call.extra else None
    if isinstance(wire, Mapping) and wire.get("format") == "openai_responses" and wire.get(CUSTOM_HINT):
        return custom_input(call.arguments)
    return call.arguments
