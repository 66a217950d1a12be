"""Counting the media a request carries, and making room by taking the oldest out.

An image or document counts its inline bytes as they go on the wire (base64 ``data`` or a ``data:`` URL; a plain
URL or a file id is a few dozen bytes; ``extra[WIRE_BYTES_KEY]`` for one whose payload an adapter keeps) and one
item. A request's bytes are its media's plus its text's, which
:func:`request_bytes` bounds from the token count.

:func:`evict_oldest_media` replaces the oldest images and documents with a one-line text naming what was there and
why it went, until the request is down to :data:`LOW_WATER` of each limit (never below one item: 75% of a limit of
one is none): a request that stays just under the limit would need another eviction, and another rewrite of the
provider's cached prefix, a few turns later. The originals are not lost: the manager archives the view before it
rewrites it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..messages import DocumentPart, ImagePart, Message, Part, TextPart, UnknownPart
from .limits import MediaLimits

__all__ = ["LOW_WATER", "TEXT_BYTES_PER_TOKEN", "WIRE_BYTES_KEY", "MediaTally", "evict_oldest_media", "media_of",
           "request_bytes"]

# ``extra`` key of an image or document whose payload the part does not hold (a framework adapter keeps the
# framework's own object and sends it back): the bytes it takes on the wire.
WIRE_BYTES_KEY = "wire_bytes"
# Evict down to this share of each limit (see the module docstring).
LOW_WATER = 0.75
# A token of text is at most a few bytes of UTF-8 on average; JSON escaping and the request's keys add some. Used
# only to bound the text's share of a byte limit (tens of megabytes, where media are nearly all of it).
TEXT_BYTES_PER_TOKEN = 6


@dataclass(frozen=True, slots=True)
class MediaTally:
    """Media bytes (inline, as sent) and items (images plus documents)."""

    bytes: int = 0
    items: int = 0

    def __add__(self, other: MediaTally) -> MediaTally:
        return MediaTally(self.bytes + other.bytes, self.items + other.items)

    def __sub__(self, other: MediaTally) -> MediaTally:
        return MediaTally(self.bytes - other.bytes, self.items - other.items)


_NONE = MediaTally()


def media_of(message: Message) -> MediaTally:
    """The media ``message`` carries (none for a text-only message, at the cost of one type check)."""
    content = message.content
    if isinstance(content, str):
        return _NONE
    size = items = 0
    for part in content:
        if _is_media(part):
            size += _part_bytes(part)
            items += 1
    return MediaTally(size, items) if items else _NONE


def request_bytes(media: MediaTally, text_tokens: int) -> int:
    """A bound on a request's bytes: its media's as sent, and its text's from the token count."""
    return media.bytes + TEXT_BYTES_PER_TOKEN * max(0, text_tokens)


def evict_oldest_media(messages: Sequence[Message], limits: MediaLimits, *, text_tokens: int = 0,
                       keep: Callable[[int, Message], bool] = lambda i, m: False) -> tuple[list[Message], int]:
    """``messages`` with the oldest images and documents replaced by a short text, until under :data:`LOW_WATER`.

    Nothing is taken from a message ``keep(index, message)`` holds (the caller's pinned and protected messages,
    the request being served). Returns (the messages, how many images and documents left). When what may go is
    not enough, every such item goes and the result is still over the limits: the caller decides what that means.
    """
    total = MediaTally()
    for m in messages:
        total = total + media_of(m)
    byte_goal = None if limits.max_bytes is None else int(limits.max_bytes * LOW_WATER)
    # (At least one item: 75% of a limit of one is none, and the newest screenshot would go with the others.)
    item_goal = None if limits.max_items is None else max(1, int(limits.max_items * LOW_WATER))

    def over(tally: MediaTally) -> bool:
        return ((byte_goal is not None and request_bytes(tally, text_tokens) > byte_goal)
                or (item_goal is not None and tally.items > item_goal))

    if not over(total):
        return list(messages), 0
    out = list(messages)
    evicted = 0
    for i, m in enumerate(messages):
        if not over(total):
            break
        if isinstance(m.content, str) or keep(i, m) or media_of(m) is _NONE:
            continue
        parts: list[Part] = []
        for part in m.content:
            if over(total) and _is_media(part):
                total = total - MediaTally(_part_bytes(part), 1)
                evicted += 1
                parts.append(TextPart(_placeholder(part), cache_control=part.cache_control))
            else:
                parts.append(part)
        out[i] = m.with_content(tuple(parts))
    return out, evicted


# Images and documents a format keeps as they came (given by a Files API id: Anthropic's ``{"type": "image", "source":
# {"type": "file", ...}}``, OpenAI Responses' ``input_image`` with ``file_id``; a Chat ``file`` part): media all the
# same to the provider, so counted and evicted as such.
_KEPT_MEDIA_TYPES = frozenset({"image", "input_image", "document", "input_file", "file"})


def _is_media(part: Part) -> bool:
    if isinstance(part, ImagePart | DocumentPart):
        return True
    return isinstance(part, UnknownPart) and part.data.get("type") in _KEPT_MEDIA_TYPES


def _part_bytes(part: Part) -> int:
    if isinstance(part, UnknownPart):
        return sum(len(value) for value in _strings(part.data))
    if not isinstance(part, ImagePart | DocumentPart):
        return 0
    size = len(part.data or "") + len(part.url or "")
    if isinstance(part, DocumentPart):
        size += len(part.file_id or "")
    held_elsewhere = part.extra.get(WIRE_BYTES_KEY)
    if isinstance(held_elsewhere, int) and not isinstance(held_elsewhere, bool) and held_elsewhere > 0:
        size += held_elsewhere
    return size


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def _placeholder(part: Part) -> str:
    if isinstance(part, UnknownPart):
        kind = "image" if part.data.get("type") in ("image", "input_image") else "document"
        return (f"[{kind} ({_size(_part_bytes(part))}) removed from the request to stay within the provider's media "
                f"limits; kept in the archive]")
    assert isinstance(part, ImagePart | DocumentPart)
    kind = "image" if isinstance(part, ImagePart) else "document"
    what = part.media_type or (part.url if part.url and not part.url.startswith("data:") and len(part.url) <= 200
                               else None)
    described = f"{kind} ({what}, {_size(_part_bytes(part))})" if what else f"{kind} ({_size(_part_bytes(part))})"
    return f"[{described} removed from the request to stay within the provider's media limits; kept in the archive]"


def _size(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    if n >= 1_000:
        return f"{n / 1_000:.0f} KB"
    return f"{n} bytes"
