"""The provider-neutral message model.

A :class:`Message` is immutable and slotted. Content is either a plain string or a tuple of parts; every part
keeps what it does not model in ``extra`` so that converting a provider's dict to a Message and back gives the
same dict. ``meta`` carries contextfold's own annotations (protection, labels, refs) and never reaches a provider.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from gc import get_referents
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TypeAlias, cast

from ._exact import exact_leaf

__all__ = [
    "EMPTY",
    "ROLES",
    "DocumentPart",
    "ImagePart",
    "Message",
    "Part",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCall",
    "UnknownPart",
    "exact_items",
    "freeze",
    "is_compaction",
    "is_opaque",
    "kept_value_type",
    "message_text",
    "same_meta_but_id",
    "value_text",
]

Role: TypeAlias = Literal["system", "developer", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool"})

class _OwnDict(dict[str, Any]):
    """The dict behind a read-only view contextfold made (a message's ``meta`` or ``extra``, :func:`freeze`).

    Never handed out, so nothing changes it; its type is what tells such a view from one a caller made over a dict
    of its own (:func:`_own_view`). A subclass without slots of its own: no larger than a dict.
    """

    __slots__ = ()


EMPTY: Mapping[str, Any] = MappingProxyType(_OwnDict())


def _own_view(value: object) -> bool:
    """Whether ``value`` is a read-only view contextfold made (over an :class:`_OwnDict`), not a caller's.

    A caller's ``MappingProxyType(ctx)`` shows a dict the caller keeps and may change later, nested values
    included: a message owns a copy of it instead (``tests/redteam/test_redteam7_proxy_meta.py``). ``gc``'s
    referents of a view are the mapping behind it, read without a copy.
    """
    if value is EMPTY:
        return True
    if type(value) is not MappingProxyType:
        return False
    behind = get_referents(value)
    return len(behind) == 1 and type(behind[0]) is _OwnDict


def _own_copy(mapping: Mapping[str, Any]) -> _OwnDict:
    """A copy of ``mapping``'s keys and values (one level) as an :class:`_OwnDict`."""
    return _OwnDict(mapping if type(mapping) is dict else _plain_copy(mapping))


def freeze(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """Return a read-only copy of ``mapping`` (the shared empty mapping when there is nothing).

    One level deep: nested values are shared (contextfold's own copies of a message share them on purpose, see
    :func:`same_meta_but_id`). What a caller hands a :class:`Message` is copied deeper (:func:`_freeze_owned`).
    A read-only view contextfold made is returned as it is; a caller's is copied.
    """
    if not mapping:
        return EMPTY
    if _own_view(mapping):
        return mapping
    return MappingProxyType(_own_copy(mapping))


def _freeze_owned(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    """:func:`freeze` with the nested values a caller may change later made the message's own (:func:`_owned`).

    A caller who keeps one and changes it later changes no message: a message found clean stays clean (shared, a
    credential written into it later reached the archive, issue 21).
    """
    copied = _own_copy(mapping)
    for key, value in copied.items():
        if type(value) not in _ATOMS and _to_own(value):  # (strings told inline: most values of a meta)
            copied[key] = _owned(value)
    return MappingProxyType(copied) if copied else EMPTY


# Copied exactly (a subclass is told by isinstance, see _to_own).
_CONTAINERS = frozenset({dict, list, tuple, set})
# Kept as they are, told at once (most values of a meta are strings): immutable, and their text never changes
# (exact types: a subclass's ``__str__`` may read what its owner changes later).
_ATOMS = frozenset({str, int, float, bool, type(None), bytes, complex, datetime.date, datetime.datetime, datetime.time,
                    datetime.timedelta, datetime.timezone})
# Value types kept as they are too, for the same reasons (exact types): a ``UUID`` or a ``Decimal`` an application
# stamps its messages with comes back as itself, as it did before they were held as their text (fifteenth session,
# lane X1); a transcript, an archive or a stored session writes their text (``serialize._unknown``), so a message
# read back from one holds that text. Named by module, looked up where loaded: a value of one means its module is
# loaded, and this module does not import them. A Decimal NaN is held as its text (unequal to itself: see _to_own).
_VALUE_TYPES = (("uuid", "UUID"), ("decimal", "Decimal"))


def kept_value_type(kind: type) -> bool:
    """Whether ``kind`` is exactly one of the value types a message keeps as they are (:data:`_VALUE_TYPES`).

    Redaction reads such a value's text (``serialize._unknown`` writes it); the bulk prefilter lists it too.
    """
    modules = sys.modules
    for module, name in _VALUE_TYPES:
        loaded = modules.get(module)
        if loaded is not None and kind is getattr(loaded, name, None):
            return True
    return False


def _to_own(value: Any) -> bool:
    """Whether ``value`` holds what a caller may change later (anything but atoms, and tuples and frozensets of them).

    A caller's ``MappingProxyType``, ``OrderedDict`` or ``defaultdict``, or a list subclass, nested in a meta was
    shared with the caller: a credential written into it after ``add()`` reached the archive in clear (red team 17).
    So was a tuple subclass (a namedtuple) holding one (red team 19), and a ``deque``, a ``bytearray`` or an object
    whose text changes (red team 19: the transcript writes its text as it is then). A string or number of a
    subclass is held as its exact value (eighteenth stop, lane S: its own ``__eq__``, ``__hash__`` or ``__str__``
    misled redaction, see :mod:`contextfold._exact`). Told by type, never ``isinstance`` (a ``__class__`` property
    claiming ``str`` kept an object shared that redaction then could not read).
    """
    kind = type(value)
    if kind in _CONTAINERS:
        return True
    if kind in _ATOMS:
        return False
    if kind is tuple or kind is frozenset:
        return any(map(_to_own, value))
    if issubclass(kind, tuple | frozenset):
        # Another subclass is copied whatever it holds: its own ``__eq__``/``__ne__`` answered whether redaction
        # changed a message, and one that lied kept a secret in clear (eighteenth stop, fix lane F2). A namedtuple
        # that reads and compares as a tuple is kept as it is when nothing in it can change.
        return not _plain_namedtuple(kind) or any(map(_to_own, value))
    if issubclass(kind, Mapping):
        return not _own_view(value)
    if issubclass(kind, str | int | float):
        return True
    if kept_value_type(kind):
        # A Decimal NaN is unequal to another (a signalling one raises on ==): a message holding one never equalled
        # its copy, so it is held as its text ("NaN", "sNaN"), as such a value was before (b52e09e).
        is_nan = getattr(value, "is_nan", None)
        return is_nan is not None and bool(is_nan())
    return True


def _owned(value: Any) -> Any:
    """``value`` as the message's own: nested dicts, lists, tuples and sets copied, any other object as its text.

    A mapping, list or set of another type (not contextfold's own view) is copied as a plain dict, list or set; a
    tuple subclass holding one as a tuple of its type when it is a namedtuple (its ``_make``), else a plain tuple (a
    subclass's own constructor may take other arguments). A value JSON has no form for (a ``deque``, a
    ``bytearray``, an application's object) is held as its text, the text a transcript writes of it
    (:func:`value_text`), taken once: what redaction checked is what the archive gets. Atoms and the value types
    (:data:`_VALUE_TYPES`) stay as they are, but a Decimal NaN (its text: see :func:`_to_own`).
    """
    kind = type(value)
    if kind is dict:
        return {k: _owned(v) for k, v in value.items()}
    if kind is list:
        return [_owned(v) for v in value]
    if kind is tuple:
        return tuple(_owned(v) for v in value) if any(map(_to_own, value)) else value
    if kind is set:
        return {_owned(v) for v in value} if any(map(_to_own, value)) else set(value)
    if kind in _ATOMS or not _to_own(value):
        return value
    if issubclass(kind, str | int | float):
        return exact_leaf(value)
    if issubclass(kind, tuple):
        items = [_owned(v) for v in value]
        return cast(Any, kind)._make(items) if _plain_namedtuple(kind) else tuple(items)
    if issubclass(kind, Mapping):
        return {k: _owned(v) for k, v in value.items()}
    if issubclass(kind, list):
        return [_owned(v) for v in value]
    if issubclass(kind, set | frozenset):
        members = {_owned(v) for v in value}
        return members if issubclass(kind, set) else frozenset(members)
    return value_text(value)


def _plain_namedtuple(kind: type) -> bool:
    """Whether ``kind`` is a namedtuple reading, comparing and hashing as a tuple does (kept as its type, see _owned).

    A namedtuple in a meta comes back as itself (an application may read its fields); one redefining how it compares
    or is read (``__eq__``, ``__iter__``...) is held as a plain tuple: only a tuple's own methods answer redaction.
    """
    return (hasattr(kind, "_fields") and hasattr(kind, "_make")
            and all(getattr(kind, name) is getattr(tuple, name) for name in _TUPLE_METHODS))


# What a namedtuple kept as its type must take from tuple (see _plain_namedtuple).
_TUPLE_METHODS = ("__eq__", "__ne__", "__hash__", "__iter__", "__len__", "__getitem__", "__contains__")


def value_text(value: Any) -> str:
    """The text of a value JSON has no form for, as a transcript writes it (its ``str``, else its type's name)."""
    try:
        return str(value)
    except Exception:  # (an object whose text fails is named by its type)
        return f"<{type(value).__name__}>"


def _plain_copy(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A plain dict of ``meta``'s keys and values, owned by the caller.

    A read-only view's ``copy()`` copies the dict behind it at C speed (``dict()`` of the view reads it key by key,
    6x slower). It is the ``copy()`` of whatever mapping is behind the view: a caller's view over a ``ChainMap``
    shares its parent maps, one over a ``defaultdict`` grows when read, one over a ``Mapping`` without ``copy()``
    raises. Those get ``dict()`` of the view, as every view did before.
    """
    if type(meta) is MappingProxyType:
        try:
            copied = meta.copy()
        except AttributeError:
            return dict(meta)
        if type(copied) is dict:
            return copied
    return dict(meta)


def same_meta_but_id(a: Message, b: Message) -> bool:
    """Whether ``b.meta`` holds ``a.meta``'s keys in order, with the same value objects but for ``meta["id"]``.

    What tells a copy of a message in a repeated history (the same objects, its own id) cheaply, by identity.
    """
    origin = a._origin
    if origin is not None and origin is b._origin:
        return True  # (copies of one message that differ only by their ids: see Message.with_meta)
    meta_a, meta_b = a.meta, b.meta
    if len(meta_a) != len(meta_b):
        return False
    for (key_a, value_a), (key_b, value_b) in zip(meta_a.items(), meta_b.items(), strict=True):
        if key_a != key_b or (value_a is not value_b and key_a != "id"):
            return False
    return True


class _ReadOnly:
    """A read-only value that pickles and deep-copies (its mappings are read-only views, which pickle refuses).

    It is rebuilt through its constructor from plain copies of its fields, and the fields that were read-only views
    are made so again; what is only remembered (a message's fingerprint, its origin) is computed again when needed.
    """

    __slots__ = ()

    # The fields holding a mapping the caller hands in (a part's or a call's ``extra``, ``cache_control``, ``data``):
    # owned like a message's meta (``__post_init__``). A Message owns its own fields itself.
    _MAPPINGS: ClassVar[tuple[str, ...]] = ()
    # The text fields: a str of a subclass given there is held as its exact value (see Message.__post_init__).
    _TEXTS: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        # A dict the caller keeps and changes later must change no message: redaction's verdict is kept by message,
        # so a credential written into a dict a ToolCall was handed went out as found clean (red team 17). The
        # formats' decoders hand views contextfold made (kept as they are). An ``extra`` of None is the empty mapping
        # (as a Message's: check_messages wants a mapping, 96ca2cf took None); another None, and what is no mapping,
        # stay.
        for name in self._TEXTS:
            text = getattr(self, name)
            if text is not None and type(text) is not str and issubclass(type(text), str):
                object.__setattr__(self, name, str.__str__(text))
        for name in self._MAPPINGS:
            value = getattr(self, name)
            if value is None or value is EMPTY:  # (the defaults: most parts and calls)
                if value is None and name == "extra":  # (None for no extra: the empty mapping, as a Message's)
                    object.__setattr__(self, name, EMPTY)
                continue
            if not _own_view(value) and isinstance(value, Mapping):
                object.__setattr__(self, name, _freeze_owned(value))

    def __reduce__(self) -> tuple[Any, ...]:
        values, frozen = [], []
        for index, f in enumerate(fields(self)):  # type: ignore[arg-type]
            if not f.init:
                continue
            value = getattr(self, f.name)
            if type(value) is MappingProxyType:
                frozen.append(index)
            values.append(_thawed(value))
        return (_rebuilt, (type(self), tuple(values), tuple(frozen)))


def _thawed(value: Any) -> Any:
    """``value`` with its read-only mappings made dicts, at any depth (the rest as it is: parts pickle themselves)."""
    kind = type(value)
    if kind is MappingProxyType or kind is dict:
        return {k: _thawed(v) for k, v in value.items()}
    if kind is list:
        return [_thawed(v) for v in value]
    if kind is tuple:
        return tuple(_thawed(v) for v in value)
    return value


def _rebuilt(cls: type[Any], values: tuple[Any, ...], frozen: tuple[int, ...]) -> Any:
    return cls(*(_freeze_owned(v) if i in frozen else v for i, v in enumerate(values)))


@dataclass(frozen=True, slots=True)
class TextPart(_ReadOnly):
    """Plain text."""

    _MAPPINGS: ClassVar[tuple[str, ...]] = ("cache_control", "extra")
    _TEXTS: ClassVar[tuple[str, ...]] = ("text",)

    text: str
    cache_control: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart(_ReadOnly):
    """An image by URL or inline base64 data."""

    _MAPPINGS: ClassVar[tuple[str, ...]] = ("cache_control", "extra")
    _TEXTS: ClassVar[tuple[str, ...]] = ("url", "data", "media_type", "detail")

    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    detail: str | None = None
    cache_control: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    type: Literal["image"] = "image"


@dataclass(frozen=True, slots=True)
class DocumentPart(_ReadOnly):
    """A document (PDF, plain text file, …) by URL, file id or inline data."""

    _MAPPINGS: ClassVar[tuple[str, ...]] = ("cache_control", "extra")
    _TEXTS: ClassVar[tuple[str, ...]] = ("url", "data", "file_id", "media_type", "title")

    url: str | None = None
    data: str | None = None
    file_id: str | None = None
    media_type: str | None = None
    title: str | None = None
    cache_control: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    type: Literal["document"] = "document"


@dataclass(frozen=True, slots=True)
class ThinkingPart(_ReadOnly):
    """Model reasoning: Anthropic thinking / redacted_thinking, OpenAI reasoning items.

    ``signature`` (Anthropic) or ``encrypted`` (OpenAI ``encrypted_content``, Anthropic redacted ``data``) must be
    sent back unchanged with the tool calls they precede, so normalization keeps them together.
    """

    _MAPPINGS: ClassVar[tuple[str, ...]] = ("cache_control", "extra")
    _TEXTS: ClassVar[tuple[str, ...]] = ("text", "signature", "encrypted")

    text: str = ""
    signature: str | None = None
    redacted: bool = False
    encrypted: str | None = None
    cache_control: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class UnknownPart(_ReadOnly):
    """A part of a kind contextfold does not model, kept verbatim for the format it came from."""

    _MAPPINGS: ClassVar[tuple[str, ...]] = ("data", "cache_control", "extra")

    data: Mapping[str, Any]
    format: str = ""
    cache_control: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    type: Literal["unknown"] = "unknown"


Part: TypeAlias = TextPart | ImagePart | DocumentPart | ThinkingPart | UnknownPart
# The part and call types whose ``==`` is the dataclass's own (over exact texts and owned mappings), see exact_items.
_EXACT_ITEM_TYPES: frozenset[type] = frozenset({TextPart, ImagePart, DocumentPart, ThinkingPart, UnknownPart})


def exact_items(items: tuple[Any, ...]) -> bool:
    """Whether every part or call in ``items`` is of contextfold's own type (none of a caller's subclass).

    Only then is ``==`` between two messages' contents or calls contextfold's answer: a subclass's own ``__eq__`` is
    called first and may say anything (one that lied kept a redaction's secret in clear, eighteenth stop, fix F2).
    """
    return _EXACT_ITEM_TYPES.issuperset(map(type, items))


@dataclass(frozen=True, slots=True)
class ToolCall(_ReadOnly):
    """A function/tool call requested by the assistant. ``arguments`` is a JSON string, as OpenAI sends it."""

    _MAPPINGS: ClassVar[tuple[str, ...]] = ("extra",)
    _TEXTS: ClassVar[tuple[str, ...]] = ("id", "name", "arguments")

    id: str
    name: str
    arguments: str = "{}"
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)

    def parsed_arguments(self) -> Any:
        """The arguments decoded from JSON (callers validate them when the message is built)."""
        return json.loads(self.arguments) if self.arguments else {}


_EXACT_ITEM_TYPES = _EXACT_ITEM_TYPES | {ToolCall}


# (weakref_slot: the read-ahead keeps a masked message built for an output without keeping the output, issue 22)
@dataclass(frozen=True, slots=True, weakref_slot=True)
class Message(_ReadOnly):
    """One message of a conversation, in no provider's shape.

    ``meta`` keys used by contextfold: ``protected`` (bool: never pruned or summarized), ``label`` (str),
    ``kind`` (``"summary"``, ``"placeholder"``, ``"retain"``, ``"user_block"``, ``"aborted_output"``, …),
    ``ref`` (a cached tool output id), ``summary_version`` and the summary metadata, ``id`` (a stable message id).
    ``extra`` keeps provider keys contextfold does not model, for a lossless round trip.

    ``meta`` and ``extra`` are the message's own, taken when it is built: nested dicts, lists, tuples and sets are
    copied (as plain ones); strings, numbers, bytes, times, ``UUID`` and ``Decimal`` values are kept as they are; any
    other value (a ``deque``, a ``bytearray``, an application's object) is held as its text, the text a transcript
    writes of it. A caller who changes what it handed in changes no message. A value JSON has no form for (a time, a
    ``UUID``, a ``Decimal``, a set) is written as its text (a set as a list) in transcripts, archives and stored
    sessions: a message read back from one holds that text. A part's or call's ``extra=None`` is the empty mapping.
    """

    role: Role
    content: str | tuple[Part, ...] = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    meta: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    _fingerprint: str | None = field(default=None, init=False, repr=False, compare=False)
    # The message this one is a copy of but for ``meta["id"]`` (the first of a chain of such copies), set only by
    # :meth:`with_meta` giving an id: two messages with the same origin are equal but for their ids, with the same
    # field objects and meta values (the manager numbers each message it is given; a repeated history's copies are
    # then told apart from other messages by identity alone, issue 22).
    _origin: Message | None = field(default=None, init=False, repr=False, compare=False)

    # -- convenience constructors -------------------------------------------------------------------------------
    @classmethod
    def system(cls, text: str, **kw: Any) -> Message:
        """A system message."""
        return cls("system", text, **kw)

    @classmethod
    def user(cls, text: str, **kw: Any) -> Message:
        """A user message."""
        return cls("user", text, **kw)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: Iterable[ToolCall] = (), **kw: Any) -> Message:
        """An assistant message, optionally with tool calls."""
        return cls("assistant", text, tuple(tool_calls), **kw)

    @classmethod
    def tool(cls, tool_call_id: str, text: str, name: str | None = None, **kw: Any) -> Message:
        """The result of tool call ``tool_call_id``."""
        return cls("tool", text, tool_call_id=tool_call_id, name=name, **kw)

    # -- views ----------------------------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """All text of the message (text parts and, for display, nothing else), joined by newlines."""
        return message_text(self.content)

    @property
    def parts(self) -> tuple[Part, ...]:
        """Content as parts, whatever form it was given in."""
        if isinstance(self.content, str):
            return (TextPart(self.content),) if self.content else ()
        return self.content

    @property
    def protected(self) -> bool:
        """Whether the message must survive compaction byte for byte."""
        return bool(self.meta.get("protected", False))

    @property
    def kind(self) -> str | None:
        """The contextfold kind annotation (summary, placeholder, …), if any."""
        kind = self.meta.get("kind")
        return kind if isinstance(kind, str) else None

    def with_meta(self, **updates: Any) -> Message:
        """A copy with ``meta`` keys added or replaced (a value of None removes the key)."""
        # The same content: the same fingerprint. A copy given only an id remembers what it is a copy of.
        own_id = len(updates) == 1 and type(updates.get("id")) is str
        return self._copy(self.content, self._merged_meta(updates), self._fingerprint,
                          (self._origin or self) if own_id else None)

    def with_content_and_meta(self, content: str | tuple[Part, ...], **updates: Any) -> Message:
        """``with_content(content).with_meta(**updates)`` in one copy (each output a masking batch replaces)."""
        return self._copy(content, self._merged_meta(updates))

    def _merged_meta(self, updates: dict[str, Any]) -> Mapping[str, Any]:
        merged = _plain_copy(self.meta)
        for key, value in updates.items():
            merged[key] = value if type(value) is str else _owned(value)
        if None in merged.values():  # (rare: then every key whose value is None goes)
            merged = {k: v for k, v in merged.items() if v is not None}
        return MappingProxyType(_OwnDict(merged)) if merged else EMPTY

    def with_id(self, id: str) -> Message:
        """``with_meta(id=id)`` for a string ``id``: a copy that remembers what it is a copy of (``_origin``).

        What ``add()`` does to each of the messages it is given, 100,000 of them for a resumed history (issue 22):
        no keyword dict, no walk of the updates, no check for keys to drop.
        """
        if type(id) is not str:  # (any other value goes through with_meta, which copies it and may drop the key)
            return self.with_meta(id=id)
        merged = _OwnDict(_plain_copy(self.meta))
        merged["id"] = id
        return self._copy(self.content, MappingProxyType(merged), self._fingerprint, self._origin or self)

    def with_content(self, content: str | tuple[Part, ...]) -> Message:
        """A copy with other content (tool calls, ids and meta kept)."""
        return self._copy(content, self.meta)

    def _copy(self, content: str | tuple[Part, ...], meta: Mapping[str, Any], fingerprint: str | None = None,
              origin: Message | None = None) -> Message:
        # Made slot by slot, not by the constructor nor dataclasses.replace (its __init__ and __post_init__ were
        # two thirds of a copy): add() gives each of 100,000 messages its id this way (issue 22). ``meta`` is frozen
        # already; content that is not a str or tuple goes through the constructor (which makes a list a tuple).
        # A subclass may have fields of its own: replace() knows them.
        if type(self) is not Message:
            return replace(self, content=content, meta=meta)
        kind = type(content)
        if kind is not str and kind is not tuple:
            return Message(self.role, content, self.tool_calls, self.tool_call_id, self.name, meta, self.extra)
        copy: Message = _new_message(Message)
        _set_role(copy, self.role)
        _set_content(copy, content)
        _set_tool_calls(copy, self.tool_calls)
        _set_tool_call_id(copy, self.tool_call_id)
        _set_name(copy, self.name)
        _set_meta(copy, meta)
        _set_extra(copy, self.extra)
        _set_fingerprint(copy, fingerprint)
        _set_origin(copy, origin)
        return copy

    def fingerprint(self) -> str:
        """A stable hash of everything a provider would see (not ``meta``); the token-count cache key."""
        fp = self._fingerprint
        if fp is None:
            fp = hashlib.blake2b(_canonical_bytes(self), digest_size=16).hexdigest()
            object.__setattr__(self, "_fingerprint", fp)
        return fp

    def __post_init__(self) -> None:
        # A text of a str subclass is held as its exact value (what JSON writes): its own __eq__/__hash__/
        # __contains__ answered redaction's caches and prefilter (a lying one passed the archive in clear).
        if type(self.content) is not str and issubclass(type(self.content), str):
            object.__setattr__(self, "content", str.__str__(self.content))
        if self.name is not None and type(self.name) is not str and issubclass(type(self.name), str):
            object.__setattr__(self, "name", str.__str__(self.name))
        if self.tool_call_id is not None and type(self.tool_call_id) is not str and \
                issubclass(type(self.tool_call_id), str):
            object.__setattr__(self, "tool_call_id", str.__str__(self.tool_call_id))
        # Accept plain dicts and lists from callers, but store read-only values so a Message never changes. A tuple
        # subclass is held as a plain tuple (its own __eq__ would answer whether redaction changed the message).
        content = self.content
        if type(content) is not str and type(content) is not tuple and isinstance(content, list | tuple):
            object.__setattr__(self, "content", tuple(content))
        calls = self.tool_calls
        if type(calls) is not tuple and isinstance(calls, list | tuple):
            object.__setattr__(self, "tool_calls", tuple(calls))
        # (An empty dict too: kept, it was the one mutable field of a message.) A read-only view the caller made is
        # the caller's dict: owned like one.
        if not _own_view(self.meta):
            object.__setattr__(self, "meta", _freeze_owned(self.meta) if self.meta else EMPTY)
        if not _own_view(self.extra):
            object.__setattr__(self, "extra", _freeze_owned(self.extra) if self.extra else EMPTY)


# The slots of a Message, written directly by Message._copy (a frozen dataclass refuses setattr; its slots do not).
_MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name", "meta", "extra", "_fingerprint", "_origin")
if tuple(f.name for f in fields(Message)) != _MESSAGE_FIELDS:  # (a new field must be copied by Message._copy too)
    raise AssertionError("Message._copy is out of date with Message's fields")
_new_message = object.__new__
(_set_role, _set_content, _set_tool_calls, _set_tool_call_id, _set_name, _set_meta, _set_extra, _set_fingerprint,
 _set_origin) = (getattr(Message, name).__set__ for name in _MESSAGE_FIELDS)


def is_compaction(part: Part) -> bool:
    """Whether ``part`` is a provider's compaction item (OpenAI Responses) or compaction block (Anthropic)."""
    return isinstance(part, UnknownPart) and part.data.get("type") == "compaction"


def is_opaque(part: Part) -> bool:
    """Whether ``part`` is a provider's opaque state, to be sent back to that provider byte for byte or not at all.

    A thinking part with a signature (Anthropic, Gemini) or encrypted content (an OpenAI reasoning item, an
    Anthropic redacted block), and a compaction item or block. Nothing in contextfold rewrites such a part: it is
    never truncated, masked, summarized or redacted (a changed byte fails the provider's signature check).
    """
    if isinstance(part, ThinkingPart):
        return part.signature is not None or part.encrypted is not None
    return is_compaction(part)


def message_text(content: str | tuple[Part, ...]) -> str:
    """The text of ``content``: the string itself, or text parts joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content if isinstance(p, TextPart))


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value


def _part_key(part: Part) -> list[Any]:
    if isinstance(part, TextPart):
        return ["t", part.text, _jsonable(part.cache_control), _jsonable(part.extra)]
    if isinstance(part, ThinkingPart):
        return ["r", part.text, part.signature, part.redacted, part.encrypted, _jsonable(part.extra)]
    if isinstance(part, ImagePart):
        return ["i", part.url, part.data, part.media_type, part.detail, _jsonable(part.extra)]
    if isinstance(part, DocumentPart):
        return ["d", part.url, part.data, part.file_id, part.media_type, part.title, _jsonable(part.extra)]
    return ["u", _jsonable(part.data), part.format]


def _canonical_bytes(message: Message) -> bytes:
    content: Any = (
        message.content if isinstance(message.content, str) else [_part_key(p) for p in message.content]
    )
    key = [
        message.role,
        content,
        [[c.id, c.name, c.arguments] for c in message.tool_calls],
        message.tool_call_id,
        message.name,
    ]
    # surrogatepass: a lone surrogate (text decoded lossily upstream) is hashed as it is, never an error.
    return json.dumps(key, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8", "surrogatepass")
