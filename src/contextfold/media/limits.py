"""What a provider accepts in media per request, and reading its errors about them.

Two limits exist in the wild: the bytes of the request (Anthropic: 32 MB for the Messages API, answered by
Cloudflare with ``413 request_too_large`` before the API sees the request) and the number of images and documents
(Anthropic: 100 images and document pages; OpenAI-compatible servers: a few). The errors word them differently;
:func:`parse_media_limit` reads each into a :class:`MediaLimitInfo` with the figures it gives.

A rate limit talks about "request too large" too (OpenAI's ``429 Request too large for gpt-4o ... on tokens per
min``): waiting, not removing media, cures it, so a 429 or a text about a per-minute quota is never read as one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..recovery._quoted import MAX_UNQUOTED_CHARS as _MAX_UNQUOTED_CHARS
from ..recovery._quoted import said_in
from ..recovery._quoted import unquoted as _unquoted
from ..recovery.overflow import MAX_ERROR_FIGURE, read_error, read_figure

__all__ = ["MediaLimitInfo", "MediaLimits", "known_limits", "parse_media_limit"]

MediaKind = Literal["bytes", "items"]

_TOO_LARGE_STATUS = 413
_RATE_LIMIT_STATUS = 429
# Error codes/types that mean "the request body is too big".
_TOO_LARGE_CODES = frozenset({"request_too_large", "payload_too_large", "request_entity_too_large"})
_FLAGS = re.IGNORECASE | re.DOTALL
# Wordings of a request over the byte limit; ``limit`` in megabytes when the text names it.
_BYTES_TEXTS = (
    re.compile(r"request exceeds the maximum allowed number of bytes", _FLAGS),
    re.compile(r"request entity too large", _FLAGS),
    re.compile(r"payload too large", _FLAGS),
    re.compile(r"request (?:body )?too large \(max(?:imum)? (?P<limit>\d+(?:\.\d+)?) ?MB\)", _FLAGS),
    re.compile(r"request size (?:limit )?exceeded", _FLAGS),
)
_MEGABYTES = re.compile(r"(?P<limit>\d+(?:\.\d+)?) ?MB\b", _FLAGS)
# Wordings of too many images/documents. Groups: ``sent`` (or ``pages`` + ``images``, or ``first`` + ``second``)
# and ``limit``.
_ITEM_TEXTS = (
    re.compile(r"too much media: (?P<pages>\d+) document pages? \+ (?P<images>\d+) images? > (?P<limit>\d+)", _FLAGS),
    re.compile(r"too many images and documents: (?P<first>\d+) \+ (?P<second>\d+) > (?P<limit>\d+)", _FLAGS),
    re.compile(r"too many images in (?:the )?request\.? max(?:imum)? is (?P<limit>\d+)", _FLAGS),
    re.compile(r"at most (?P<limit>\d+) images?(?:\(s\))? (?:may|can) be provided in one request", _FLAGS),
    re.compile(r"request contains (?P<sent>\d+) images?, exceeding the maximum of (?P<limit>\d+)", _FLAGS),
    re.compile(r"number of images (?:in the request )?(?:\((?P<sent>\d+)\) )?exceeds (?:the )?(?:maximum|limit)"
               r"(?: of)? \(?(?P<limit>\d+)\)?", _FLAGS),
)
_QUOTA_WORDS = re.compile(r"per min|per day|tokens per|requests per|\bTPM\b|\bRPM\b|quota", _FLAGS)


@dataclass(frozen=True, slots=True)
class MediaLimits:
    """The most a request may carry: bytes on the wire (media and text), and images plus documents.

    None: no limit known for that measure.
    """

    max_bytes: int | None = None
    max_items: int | None = None

    def lower(self, other: MediaLimits) -> MediaLimits:
        """The stricter of the two, measure by measure."""
        return MediaLimits(_least(self.max_bytes, other.max_bytes), _least(self.max_items, other.max_items))

    @property
    def known(self) -> bool:
        """Whether any limit is known."""
        return self.max_bytes is not None or self.max_items is not None


# Published limits: Anthropic's 32 MB request size and 100 images and document pages per request. The bytes are
# counted as 10^6 (the smaller reading of "MB").
_PUBLISHED: dict[str, MediaLimits] = {"anthropic": MediaLimits(max_bytes=32_000_000, max_items=100)}


def known_limits(provider: str | None) -> MediaLimits:
    """The published media limits of ``provider`` (a model registry's provider name), or none known."""
    return _PUBLISHED.get((provider or "").lower(), MediaLimits())


@dataclass(frozen=True, slots=True)
class MediaLimitInfo:
    """A provider's refusal of a request for its media.

    Attributes:
        kind: ``"bytes"`` (the request's size) or ``"items"`` (images and documents).
        message: The provider's wording.
        limit: The provider's limit in that measure (bytes, or items), when the error gives it.
        sent: What the provider counted in the rejected request, when the error gives it (items only; a document
            counts as its pages there).
        provider: Who said it, when it can be told.
        status_code: The HTTP status, when known.
    """

    kind: MediaKind
    message: str
    limit: int | None = None
    sent: int | None = None
    provider: str | None = None
    status_code: int | None = None


def parse_media_limit(error: object, *, provider: str | None = None) -> MediaLimitInfo | None:
    """What an error about a request's media says, or None when ``error`` is some other error.

    >>> parse_media_limit('{"type": "error", "error": {"type": "invalid_request_error", '
    ...                   '"message": "Too much media: 0 document pages + 103 images > 100"}}').limit
    100
    >>> parse_media_limit("Request too large for gpt-4o on tokens per min (TPM): Limit 30000") is None
    True
    """
    reading = read_error(error)
    if reading.status == _RATE_LIMIT_STATUS:
        return None
    said_by = provider or reading.provider
    for text in reading.texts:
        # (an item wording said only in quotes is the client's echo, reviewer 2 of s17: no count to evict to)
        said = said_in(text, _ITEM_TEXTS)
        if said is not None and said.match is not None:
            match = said.match
            return MediaLimitInfo("items", text.strip(), limit=read_figure(match["limit"]), sent=_items_sent(match),
                                  provider=said_by, status_code=reading.status)
    texts = [t for t in reading.texts if not _QUOTA_WORDS.search(t)]
    if len(texts) < len(reading.texts) and reading.status != _TOO_LARGE_STATUS:
        return None  # a quota's wording ("... tokens per min"): not about the request's bytes
    unread: MediaLimitInfo | None = None  # a byte wording said only in quotes or past the cap: no figures
    for text in texts:
        said = said_in(text, _BYTES_TEXTS)
        if said is None:
            continue
        if said.match is not None:
            return MediaLimitInfo("bytes", text.strip(), limit=_megabytes(said.match.string), provider=said_by,
                                  status_code=reading.status)
        # (httpx's "Client error '413 Request Entity Too Large' for url ...": a byte limit, as at 08dd6b2)
        unread = unread or MediaLimitInfo("bytes", text.strip(), provider=said_by, status_code=reading.status)
    if unread is not None:
        return unread
    if reading.status == _TOO_LARGE_STATUS or reading.codes & _TOO_LARGE_CODES:
        message = texts[0].strip() if texts else "the request is too large"
        figures = _unquoted(message) if len(message) <= _MAX_UNQUOTED_CHARS else ""
        return MediaLimitInfo("bytes", message, limit=_megabytes(figures), provider=said_by,
                              status_code=reading.status)
    return None


def _items_sent(match: re.Match[str]) -> int | None:
    groups = match.groupdict()
    for first, second in (("pages", "images"), ("first", "second")):
        if groups.get(first) is not None:
            a, b = read_figure(groups[first]), read_figure(groups[second])
            return None if a is None or b is None else a + b
    return read_figure(groups.get("sent"))


def _megabytes(text: str) -> int | None:
    match = _MEGABYTES.search(text)
    if match is None:
        return None
    limit = float(match["limit"]) * 1_000_000
    # (a figure of hundreds of digits reads as infinity: no limit a provider has, see MAX_ERROR_FIGURE)
    return int(limit) if limit <= MAX_ERROR_FIGURE else None


def _least(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
