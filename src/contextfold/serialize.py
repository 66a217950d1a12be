"""contextfold's own JSON form of a :class:`~contextfold.messages.Message`: OpenAI-chat-like, and lossless.

Archives, view dumps and session stores write messages one per line in this form. It follows the OpenAI Chat
shape where that shape can say it (``role``, ``content``, ``tool_calls`` with ``function.name/arguments``,
``tool_call_id``, ``name``) and keeps everything else under explicit keys (``meta``, ``extra``, typed parts), so
that ``message_from_dict(message_to_dict(m)) == m`` for every message whose ``meta``/``extra`` hold JSON values.

Keys that would only repeat a default are left out, which keeps archived transcripts small and readable. JSON has
no tuples: a tuple nested inside ``meta`` or ``extra`` comes back as a list.
"""

from __future__ import annotations

import json
import operator
import re
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .errors import InvalidHistory
from .messages import (
    ROLES,
    DocumentPart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnknownPart,
    freeze,
    same_meta_but_id,
    value_text,
)

__all__ = [
    "dumps_messages",
    "encode_messages",
    "iter_messages_jsonl",
    "json_text",
    "loads_messages",
    "message_from_dict",
    "message_from_line",
    "message_to_dict",
    "part_from_dict",
    "part_to_dict",
]

# Optional string fields of each part type, written only when set (None is the default of each).
_IMAGE_FIELDS = ("url", "data", "media_type", "detail")
_DOCUMENT_FIELDS = ("url", "data", "file_id", "media_type", "title")
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name", "meta", "extra"})


def _plain(value: Any) -> Any:
    """Turn read-only mappings and tuples into the dicts and lists that ``json`` writes."""
    if isinstance(value, str | int | float | bool | None):
        return value  # (the common leaves, checked before the Mapping ABC, which is slow to test against)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return _unknown(value)


def _unknown(value: Any) -> Any:
    """What JSON writes of a value it has no form for (a caller's meta may hold any): a set as a list, else its text.

    A ``datetime`` or a ``UUID`` in a message's meta stopped every compaction (its transcript could not be written:
    ``TypeError``, every ``prepare()`` from then on; red team 17). Redaction reads the same text (``redact_obj``).
    """
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=repr)  # (sorted: a transcript's line is the same every time)
    return value_text(value)  # (what a Message holds of such a value it was handed: the same text, see messages._owned)


def part_to_dict(part: Part) -> dict[str, Any]:
    """The JSON form of one content part (``type`` first, unset optional fields left out)."""
    out: dict[str, Any] = {"type": part.type}
    if isinstance(part, TextPart):
        out["text"] = part.text
    elif isinstance(part, ImagePart | DocumentPart):
        names = _IMAGE_FIELDS if isinstance(part, ImagePart) else _DOCUMENT_FIELDS
        for name in names:
            value = getattr(part, name)
            if value is not None:
                out[name] = value
    elif isinstance(part, ThinkingPart):
        out["text"] = part.text
        if part.signature is not None:
            out["signature"] = part.signature
        if part.redacted:
            out["redacted"] = True
        if part.encrypted is not None:
            out["encrypted"] = part.encrypted
    else:
        out["data"] = _plain(part.data)
        if part.format:
            out["format"] = part.format
    if part.cache_control is not None:
        out["cache_control"] = _plain(part.cache_control)
    if part.extra:
        out["extra"] = _plain(part.extra)
    return out


def _opt_str(d: Mapping[str, Any], key: str, where: str, index: int | None) -> str | None:
    value = d.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidHistory(f"must be a string, got {type(value).__name__}", index=index, field=f"{where}.{key}")
    return value


def _opt_mapping(d: Mapping[str, Any], key: str, where: str, index: int | None) -> Mapping[str, Any] | None:
    value = d.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise InvalidHistory(f"must be an object, got {type(value).__name__}", index=index, field=f"{where}.{key}")
    return value


def part_from_dict(d: Mapping[str, Any], *, index: int | None = None, where: str = "content") -> Part:
    """Rebuild a part from :func:`part_to_dict` output; ``index``/``where`` only locate errors."""
    if not isinstance(d, Mapping):
        raise InvalidHistory(f"a content part must be an object, got {type(d).__name__}", index=index, field=where)
    kind = d.get("type")
    cache_control = _opt_mapping(d, "cache_control", where, index)
    cc = freeze(cache_control) if cache_control is not None else None
    extra = freeze(_opt_mapping(d, "extra", where, index))
    if kind == "text":
        text = d.get("text")
        if not isinstance(text, str):
            raise InvalidHistory("a text part needs a string 'text'", index=index, field=f"{where}.text")
        return TextPart(text, cache_control=cc, extra=extra)
    if kind in ("image", "document"):
        s = {name: _opt_str(d, name, where, index) for name in (*_IMAGE_FIELDS, *_DOCUMENT_FIELDS)}
        if kind == "image":
            return ImagePart(s["url"], s["data"], s["media_type"], s["detail"], cc, extra)
        return DocumentPart(s["url"], s["data"], s["file_id"], s["media_type"], s["title"], cc, extra)
    if kind == "thinking":
        redacted = d.get("redacted", False)
        if not isinstance(redacted, bool):
            raise InvalidHistory("must be a boolean", index=index, field=f"{where}.redacted")
        return ThinkingPart(
            text=_opt_str(d, "text", where, index) or "",
            signature=_opt_str(d, "signature", where, index),
            redacted=redacted,
            encrypted=_opt_str(d, "encrypted", where, index),
            cache_control=cc,
            extra=extra,
        )
    if kind == "unknown":
        data = _opt_mapping(d, "data", where, index)
        if data is None:
            raise InvalidHistory("an unknown part needs an object 'data'", index=index, field=f"{where}.data")
        fmt = _opt_str(d, "format", where, index) or ""
        return UnknownPart(freeze(data), format=fmt, cache_control=cc, extra=extra)
    raise InvalidHistory(
        f"unknown part type {kind!r} (expected text, image, document, thinking or unknown)",
        index=index,
        field=f"{where}.type",
    )


def message_to_dict(m: Message) -> dict[str, Any]:
    """The lossless JSON form of ``m``: OpenAI-chat-like keys plus ``meta`` and ``extra`` when they are set."""
    out: dict[str, Any] = {"role": m.role}
    out["content"] = m.content if isinstance(m.content, str) else [part_to_dict(p) for p in m.content]
    if m.tool_calls:
        calls = []
        for call in m.tool_calls:
            item: dict[str, Any] = {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            if call.extra:
                item["extra"] = _plain(call.extra)
            calls.append(item)
        out["tool_calls"] = calls
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        out["name"] = m.name
    if m.meta:
        out["meta"] = _plain(m.meta)
    if m.extra:
        out["extra"] = _plain(m.extra)
    return out


def _tool_call_from_dict(d: Any, index: int | None, where: str) -> ToolCall:
    if not isinstance(d, Mapping):
        raise InvalidHistory("a tool call must be an object", index=index, field=where)
    fn = d.get("function")
    if not isinstance(fn, Mapping):
        raise InvalidHistory("a tool call needs an object 'function'", index=index, field=f"{where}.function")
    call_id, name, arguments = d.get("id"), fn.get("name"), fn.get("arguments", "{}")
    if not isinstance(call_id, str):
        raise InvalidHistory("must be a string", index=index, field=f"{where}.id")
    if not isinstance(name, str):
        raise InvalidHistory("must be a string", index=index, field=f"{where}.function.name")
    if isinstance(arguments, Mapping):
        # What a session store of 37c7cef and before wrote for a ToolCall given a dict: read as its JSON text
        # (else every load of that session was refused).
        arguments = json_text(arguments)
    elif not isinstance(arguments, str):
        raise InvalidHistory("must be a JSON string", index=index, field=f"{where}.function.arguments")
    extra = _opt_mapping(d, "extra", where, index)
    return ToolCall(call_id, name, arguments, extra=freeze(extra))


def message_from_dict(d: Mapping[str, Any], *, index: int | None = None) -> Message:
    """Rebuild a message from :func:`message_to_dict` output.

    Args:
        d: the JSON form.
        index: the message's position in its list, named in errors.

    Raises:
        InvalidHistory: naming the index and the field, for anything that is not the JSON form.
    """
    if not isinstance(d, Mapping):
        raise InvalidHistory(f"a message must be an object, got {type(d).__name__}", index=index)
    unknown = sorted(set(d) - _MESSAGE_KEYS)
    if unknown:
        raise InvalidHistory(f"unknown key(s) {', '.join(map(repr, unknown))}", index=index)
    role = d.get("role")
    if role not in ROLES:
        raise InvalidHistory(f"unknown role {role!r} (expected one of {sorted(ROLES)})", index=index, field="role")
    raw = d.get("content", "")
    content: str | tuple[Part, ...]
    if isinstance(raw, str):
        content = raw
    elif isinstance(raw, list):
        content = tuple(part_from_dict(p, index=index, where=f"content[{i}]") for i, p in enumerate(raw))
    else:
        raise InvalidHistory("must be a string or a list of parts", index=index, field="content")
    raw_calls = d.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise InvalidHistory("must be a list", index=index, field="tool_calls")
    calls = tuple(_tool_call_from_dict(c, index, f"tool_calls[{i}]") for i, c in enumerate(raw_calls))
    return Message(
        role,
        content,
        calls,
        tool_call_id=_opt_str(d, "tool_call_id", "message", index),
        name=_opt_str(d, "name", "message", index),
        meta=freeze(_opt_mapping(d, "meta", "message", index)),
        extra=freeze(_opt_mapping(d, "extra", "message", index)),
    )


# A UTF-16 surrogate code point: in a Python str only as a lone surrogate (text decoded lossily upstream).
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)`` that can always be written as UTF-8.

    A lone surrogate cannot be encoded as UTF-8; written as its JSON ``uXXXX`` escape instead, it is valid JSON that
    loads back to the same string, so the text stays lossless and readable (other characters stay as they are).
    """
    text = json.dumps(value, ensure_ascii=False, **options)
    if text.isascii():  # (no surrogate; one C pass, ~50x faster than the search: an event of 100,000 ids is 2 MB)
        return text
    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _SURROGATE_RE.search(text) else text


def dumps_messages(messages: Iterable[Message]) -> str:
    """Messages as JSON Lines: one compact object per line, each line ending in a newline."""
    return "".join(_message_lines(messages))


def encode_messages(messages: Iterable[Message]) -> bytes:
    """:func:`dumps_messages` encoded as UTF-8 (the pieces of :func:`encode_message_chunks`, joined)."""
    return b"".join(encode_message_chunks(messages))


# The size of the pieces encode_message_chunks yields, in characters of JSON text.
_CHUNK_CHARS = 1 << 20


def encode_message_chunks(messages: Iterable[Message]) -> Iterator[bytes]:
    """:func:`dumps_messages` encoded as UTF-8, in pieces of about a megabyte of whole lines, each as it is made.

    What the archive streams to a store that takes pieces (issue 22): a 100,000-message transcript is ~260 MB, and
    its lines' bytes and the joined whole were held at once, and a store's copy of that on top.
    """
    pending: list[str] = []
    size = 0
    for line in _message_lines(messages):
        pending.append(line)
        size += len(line)
        if size >= _CHUNK_CHARS:
            yield "".join(pending).encode()
            pending, size = [], 0
    if pending:
        yield "".join(pending).encode()


def encode_message_pieces(messages: Iterable[Message]) -> list[bytes]:
    """:func:`dumps_messages` encoded as UTF-8, a line or two pieces at a time, as the in-memory archive keeps them.

    A copy of a message met before in the same batch (see :class:`_Repeats`) comes as two pieces: the head of its
    line before its id, one bytes object shared by every copy, then its own id and the rest. An in-memory store
    that keeps the pieces as they come holds a repeated history's transcript about once per content (issue 22). A
    message that is the only copy of its origin in the batch (each message of a session) is one piece, its line.
    A list, not a generator: the store keeps every piece anyway, and a generator's resumption per piece was a third
    of encoding a 100,000-message transcript of copies.
    """
    items = list(messages)  # (held for the call: the copies keep their origins alive, so an id names one origin)
    fresh: deque[tuple[Message, str]] = deque(maxlen=_LINE_CACHE_ENTRIES)
    repeats = _Repeats()
    # Copies given only an id (Message._origin): one template per origin, made from the first met, without the
    # per-copy comparisons of _Repeats (issue 22: 100,000 recorded messages, ~30 copies of each). The lines made
    # before are looked up only where one is used: for an origin's first copy, and for messages that are no copy.
    by_origin: dict[int, tuple[bytes, str]] = {}
    # An origin met once in the batch shares its head with no other line: its copy is encoded as any message is (a
    # session's messages are each a copy of their own origin, issue 22: the template, cut and encoded in two pieces,
    # cost a cold compaction's transcript 66-70 ms of CPU against 45-50 for whole lines).
    copied = Counter(map(id, map(_ORIGIN_OF, items)))
    out: list[bytes] = []
    put = out.append
    quote = _quote  # (what _LINE_ENCODER.encode does with a str, without its method call)
    for m in items:
        origin = m._origin
        if origin is not None and copied[id(origin)] == 1:
            # (its line made ahead, or made now; not remembered: most of such a batch is a compacted view's past)
            line = _remembered_line(m)
            put((line if line is not None else _encode_line(m)).encode())
            continue
        if origin is not None:
            own = m.meta.get(ID_META_KEY)
            if type(own) is str and (own.isascii() or not _has_surrogate(own)):
                template = by_origin.get(id(origin))
                if template is None:
                    # (the line made ahead, when the read-ahead serialized this copy: split, not made again)
                    line = _remembered_line(m)
                    ahead = _template_from_line(m, line, own) if line is not None else None
                    template = by_origin[id(origin)] = ahead or _template_of(m, repeats)
                if template[0]:
                    put(template[0])
                    put(f"{quote(own)}{template[1]}\n".encode())
                    continue
        pieces = repeats.pieces(m)  # (first: a copy's line remembered whole would be held whole)
        if pieces is not None:
            out += pieces
            continue
        line = _remembered_line(m)
        if line is not None:
            put(line.encode())
            continue
        line = _encode_line(m, repeats, copies=False)
        fresh.append((m, line))
        put(line.encode())
    _remember_lines(fresh)
    return out


_ORIGIN_OF = operator.attrgetter("_origin")


def _remembered_line(m: Message) -> str | None:
    """``m``'s line as :func:`message_line` remembered it, or None."""
    with _lines_lock:
        entry = _lines.get(id(m))
    return entry[1] if entry is not None and entry[0] is m else None


def _template_from_line(m: Message, line: str, own: str) -> tuple[bytes, str] | None:
    """:func:`_template_of` ``m`` cut from ``m``'s whole line (made before), or None when it cannot be cut safely.

    Only for the common shape with ``meta["id"]`` as its last key: the line then ends with the id's JSON and the
    two closing braces (meta's, the message's), and everything before is the same for every copy (issue 22: a
    session's messages each have an origin, and the transcript encoded again every line the read-ahead had made).
    """
    meta = m.meta
    if type(m.content) is not str or m.extra or not meta or list(meta)[-1] != ID_META_KEY:
        return None
    end = f"{_quote(own)}}}}}\n"
    if not line.endswith(_ID_KEY_JSON + end):
        return None
    return line[: len(line) - len(end)].encode(), "}}"


def _template_of(m: Message, repeats: _Repeats) -> tuple[bytes, str]:
    """(the UTF-8 of ``m``'s line before its id's JSON, the line after it); ``(b"", "")`` when it has no such form.

    The common shape is cut from its pieces; any other (``extra``, parts, a lone surrogate in the line) from the
    line of a probe copy whose id is a marker (issue 22: 2,916 of the 100,000 recorded messages carry their wire
    form in ``extra``, and each copy was encoded whole, a quarter of the transcript's time).
    """
    if not m.extra:
        split = _encode_plain_split(m, repeats)
        if split is not None and ((whole := split[0] + split[1]).isascii() or not _has_surrogate(whole)):
            return split[0].encode(), split[1]
    return _template_by_marker(m)


# An id no message has (checked: the marker's JSON must occur once in the probe's line), cut out of a probe's line.
_ID_MARKER = "\x00contextfold:id-marker\x00"


def _template_by_marker(m: Message) -> tuple[bytes, str]:
    """:func:`_template_of` ``m``, cut from the line of ``m`` with the marker as its id (``(b"", "")`` if ambiguous).

    A copy's line is the probe's with the marker's JSON replaced by its id's: every other byte is the same, and the
    escapes of lone surrogates (:func:`_encode_line`) are per character, never across the id's quotes.
    """
    line = _encode_line(m.with_meta(id=_ID_MARKER))
    marker = _quote(_ID_MARKER)
    at = line.find(marker)
    if at < 0 or line.find(marker, at + 1) >= 0:
        return b"", ""
    return line[:at].encode(), line[at + len(marker):-1]


def _message_lines(messages: Iterable[Message]) -> Iterator[str]:
    """Each message's line, remembered or made (and the newest made remembered once all are given)."""
    items = list(messages)
    with _lines_lock:
        known = [_lines.get(id(m)) for m in items]
    # Only the newest are remembered: they are the ones a later transcript (the view after compaction) holds, and
    # remembering a 100,000-message transcript would only push each entry out again.
    fresh: deque[tuple[Message, str]] = deque(maxlen=_LINE_CACHE_ENTRIES)
    repeats = _Repeats()
    for m, entry in zip(items, known, strict=True):
        if entry is not None and entry[0] is m:
            yield entry[1]
        else:
            line = _encode_line(m, repeats)
            fresh.append((m, line))
            yield line
    _remember_lines(fresh)


class _Repeats:
    """The JSON of values met more than once in one transcript, by the value object (issue 22).

    A history that repeats an output holds the same text object in each copy (only the message's id differs): its
    JSON is made once. A value is kept (not its JSON) the first time, so a transcript of distinct texts holds no
    second copy of them; the JSON is remembered from the second time on.
    """

    __slots__ = ("_copies", "_json", "_seen")

    def __init__(self) -> None:
        self._seen: dict[int, object] = {}
        self._json: dict[int, tuple[object, str]] = {}
        # A message's line around its id, by its content and calls objects: the copies of a message in a repeated
        # history (the same objects, another ``meta["id"]``) take it with their own id (issue 22).
        self._copies: dict[tuple[int, int], tuple[Message, tuple[str, str, bytes] | None]] = {}

    def line(self, m: Message) -> str | None:
        """``_encode_line(m)`` from the line of a copy of ``m`` made before, or None (then it is made anew).

        A copy: the same content and tool calls objects, the same role, call id, name and meta values (by object,
        in order) but for ``meta["id"]``, no ``extra``. Its line is the first copy's with the id's JSON swapped.
        """
        found = self._template(m)
        if found is None:
            return None
        (head, tail, _), own = found
        return f"{head}{_LINE_ENCODER.encode(own)}{tail}\n"

    def pieces(self, m: Message) -> tuple[bytes, bytes] | None:
        """:meth:`line` encoded, in two pieces: the head shared by the copies (one object), then ``m``'s own part."""
        found = self._template(m)
        if found is None:
            return None
        (_, tail, head_bytes), own = found
        return head_bytes, f"{_LINE_ENCODER.encode(own)}{tail}\n".encode()

    def _template(self, m: Message) -> tuple[tuple[str, str, bytes], str] | None:
        """The line template of ``m``'s copies (head, tail, the head's UTF-8) and ``m``'s id; None when it has none."""
        own = m.meta.get(ID_META_KEY)
        content = m.content
        if type(own) is not str or type(content) is not str or m.extra:
            return None
        key = (id(content), id(m.tool_calls))
        known = self._copies.get(key)
        if known is None or known[0].content is not content or known[0].tool_calls is not m.tool_calls:
            # The first time: only noted (a transcript of distinct messages holds no second copy of its lines).
            self._copies[key] = (m, None)
            return None
        first, template = known
        if not _copy_but_id(first, m) or (not own.isascii() and _has_surrogate(own)):
            return None
        if template is None:  # (the second time: the template is made, from this copy)
            split = _encode_plain_split(m, self)
            whole = "" if split is None else split[0] + split[1]
            # ("": a message of this content is made anew each time: not the common shape, or a lone surrogate)
            template = ("", "", b"") if split is None or (not whole.isascii() and _has_surrogate(whole)) else \
                (split[0], split[1], split[0].encode())
            self._copies[key] = (first, template)
        if not template[0]:
            return None
        return template, own

    def encode(self, value: Any, make: Callable[[Any], str]) -> str:
        """``make(value)``, or what it made for this object before."""
        key = id(value)
        known = self._json.get(key)
        if known is not None and known[0] is value:
            return known[1]
        text = make(value)
        if self._seen.get(key) is value:
            self._json[key] = (value, text)
        else:
            self._seen[key] = value  # (kept: its id cannot be another value's while this transcript is made)
        return text


# Lines by message (issue 15): a compaction archives the whole view, most of which an earlier transcript archived
# already (or the background thread serialized while the agent waited for its model). Messages are immutable, so a
# message's line never changes; each entry keeps its message, so that its id cannot be reused while remembered.
_LINE_CACHE_ENTRIES = 16_384
_LINE_CACHE_CHARS = 32_000_000
_lines: OrderedDict[int, tuple[Message, str]] = OrderedDict()
_lines_chars = 0
_lines_lock = threading.Lock()


# The meta key of a message's id (the manager numbers every message it is given; copies differ only by it).
ID_META_KEY = "id"

# Texts shorter than this are encoded again rather than looked up (a lookup costs about as much).
_REPEAT_MIN_CHARS = 256

# One encoder for every line: json.dumps with options builds a new encoder per call (a third of the time of a line).
_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
# How the id's key reads in a line, just before the id's JSON.
_ID_KEY_JSON = f"{json.dumps(ID_META_KEY)}:"
# What _LINE_ENCODER.encode gives for a str (its C string encoder, called without the method in front of it).
_quote: Callable[[str], str] = json.encoder.encode_basestring


def _copy_but_id(a: Message, b: Message) -> bool:
    """Whether ``b``'s role, call id, name and meta (by object, in order) are ``a``'s but for ``meta["id"]``."""
    origin = a._origin
    if origin is not None and origin is b._origin:  # (copies of one message, see Message.with_meta)
        return not b.extra
    if a.role != b.role or a.tool_call_id != b.tool_call_id or a.name != b.name or b.extra:
        return False
    return same_meta_but_id(a, b)


def _encode_line(m: Message, repeats: _Repeats | None = None, *, copies: bool = True) -> str:
    """``m`` as one line of JSON Lines, lone surrogates escaped (see :func:`json_text`).

    ``copies=False``: ``repeats`` was asked for a copy's line already (its texts' JSON is still taken from it).
    """
    if repeats is not None and copies:
        line = repeats.line(m)
        if line is not None:
            return line
    text = _encode_plain(m, repeats)
    if text is None:
        text = _LINE_ENCODER.encode(message_to_dict(m))
    if not text.isascii() and _has_surrogate(text):
        text = _SURROGATE_RE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
    return text + "\n"


def _has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate.

    The UTF-8 codec finds one at C speed; the regex search it replaces was a sixth of serializing a long transcript.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _encode_plain(m: Message, repeats: _Repeats | None = None) -> str | None:
    """The JSON of :func:`message_to_dict` written directly, for the common shape (else None).

    The common shape: text content, no ``extra`` anywhere, ``meta`` with string keys. Most of a long transcript is that,
    and building the dict to encode it cost twice as much as the text (tests/archive/test_arch_serialize.py
    compares the two). ``repeats``: the JSON of texts and meta values met before in the same transcript.
    """
    pieces = _plain_pieces(m, repeats)
    return None if pieces is None else "".join(pieces[0])


def _encode_plain_split(m: Message, repeats: _Repeats | None = None) -> tuple[str, str] | None:
    """:func:`_encode_plain` of ``m`` cut around the JSON of ``meta["id"]`` (a string): what comes before, after."""
    found = _plain_pieces(m, repeats)
    if found is None or found[1] < 0:
        return None
    pieces, at = found
    return "".join(pieces[:at]), "".join(pieces[at + 1:])


def _plain_pieces(m: Message, repeats: _Repeats | None = None) -> tuple[list[str], int] | None:
    """The pieces of :func:`_encode_plain`'s text, and the index of the piece that is ``meta["id"]``'s JSON (or -1)."""
    content = m.content
    if type(content) is not str or m.extra:
        return None
    encode = _LINE_ENCODER.encode  # (a str goes straight to the C string encoder)
    content_json = encode(content) if repeats is None or len(content) < _REPEAT_MIN_CHARS else \
        repeats.encode(content, encode)
    pieces = ['{"role":', encode(m.role), ',"content":', content_json]
    if m.tool_calls:
        calls: list[str] = []
        for call in m.tool_calls:
            if call.extra:
                return None
            calls.append(f'{{"id":{encode(call.id)},"type":"function","function":{{"name":{encode(call.name)},'
                         f'"arguments":{encode(call.arguments)}}}}}')
        pieces += [',"tool_calls":[', ",".join(calls), "]"]
    if m.tool_call_id is not None:
        pieces += [',"tool_call_id":', encode(m.tool_call_id)]
    if m.name is not None:
        pieces += [',"name":', encode(m.name)]
    id_at = -1
    if m.meta:
        pieces.append(',"meta":{')
        for n, (key, value) in enumerate(m.meta.items()):
            if type(key) is not str:
                return None
            pieces.append(f"{',' if n else ''}{encode(key)}:")
            # (A structured value, e.g. an importer's source_extra, the same as in the dict: one encoder for both.)
            if type(value) is str:
                if key == ID_META_KEY:
                    id_at = len(pieces)
                pieces.append(encode(value) if repeats is None or len(value) < _REPEAT_MIN_CHARS else
                              repeats.encode(value, encode))
            elif repeats is None:
                pieces.append(encode(_plain(value)))
            else:
                pieces.append(repeats.encode(value, _plain_json))
        pieces.append("}")
    pieces.append("}")
    return pieces, id_at


def _plain_json(value: Any) -> str:
    return _LINE_ENCODER.encode(_plain(value))


def message_line(m: Message) -> str:
    """``m`` as one line of JSON Lines (newline included), remembered for the next time it is archived."""
    with _lines_lock:
        known = _lines.get(id(m))
    if known is not None and known[0] is m:
        return known[1]
    line = _encode_line(m)
    _remember_lines([(m, line)])
    return line


def _remember_lines(lines: Iterable[tuple[Message, str]]) -> None:
    """Remember each message's line, the least recently remembered dropped past the cache's bounds."""
    global _lines_chars
    with _lines_lock:
        for m, line in lines:
            if id(m) not in _lines:
                _lines[id(m)] = (m, line)
                _lines_chars += len(line)
        while len(_lines) > _LINE_CACHE_ENTRIES or _lines_chars > _LINE_CACHE_CHARS:
            _lines_chars -= len(_lines.popitem(last=False)[1][1])


def iter_messages_jsonl(text: str, *, source: str = "") -> Iterator[Message]:
    """Messages from JSON Lines; blank lines are skipped, errors name the line (and ``source``)."""
    # Split on "\n" only: str.splitlines() also breaks at U+2028, U+0085, … which JSON writes unescaped.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield message_from_line(line, lineno, source=source)


def message_from_line(line: str, lineno: int, *, source: str = "") -> Message:
    """The message of line ``lineno`` of a JSON Lines text; ``InvalidHistory`` naming the line otherwise.

    Whatever the line holds: a torn write, a 5,000-digit number, arrays nested past the parser's own limit (every
    later walk of a message recurses, so nesting is bounded here too).
    """
    from .formats._common import check_nesting, json_problem

    where = f"{source} line {lineno}" if source else f"line {lineno}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidHistory(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise InvalidHistory(f"{where}: {json_problem(exc)}") from None
    try:
        check_nesting(obj, index=lineno - 1)
        return message_from_dict(obj, index=lineno - 1)
    except InvalidHistory as exc:
        raise InvalidHistory(f"{where}: {exc.problem}", index=exc.index, field=exc.field) from None


def loads_messages(text: str, *, source: str = "") -> list[Message]:
    """All messages of a JSON Lines text (see :func:`iter_messages_jsonl`)."""
    return list(iter_messages_jsonl(text, source=source))
