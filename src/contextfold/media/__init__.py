"""Media limits: the images and documents a request may carry, kept under what the provider accepts.

A provider refuses a request for its media long before the token window is full: Anthropic answers a Messages
request over 32 MB with ``413 request_too_large`` and one with more than 100 images and document pages with
``Too much media: 0 document pages + 103 images > 100``; other providers and local servers cap the images per
request (``Too many images in request. Max is 10``). An agent that takes screenshots meets these limits within an
hour, and every later call fails the same way: the session is dead unless old media leave the request.

Contract: :func:`parse_media_limit` reads such an error (an exception, a body or text, as
:func:`contextfold.recovery.parse_overflow` does for context-length errors; a rate limit is never one) into a
:class:`MediaLimitInfo`; :class:`MediaLimits` are the most media bytes and items a request may carry
(:func:`known_limits` for the providers whose limits are published); :func:`media_of` counts what a message carries
and :func:`evict_oldest_media` replaces the oldest images and documents with a short text naming what was there,
down to a share of the limits, never touching pinned or protected messages or the latest user message. The manager
keeps the limits in force (``ContextManager.learn_media_limit``) and overflow recovery teaches them from the errors.
Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .budget import LOW_WATER, WIRE_BYTES_KEY, MediaTally, evict_oldest_media, media_of, request_bytes
    from .limits import MediaLimitInfo, MediaLimits, known_limits, parse_media_limit

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "LOW_WATER": ".budget",
    "WIRE_BYTES_KEY": ".budget",
    "MediaLimitInfo": ".limits",
    "MediaLimits": ".limits",
    "MediaTally": ".budget",
    "evict_oldest_media": ".budget",
    "known_limits": ".limits",
    "media_of": ".budget",
    "parse_media_limit": ".limits",
    "request_bytes": ".budget",
}
__all__ = ["LOW_WATER", "WIRE_BYTES_KEY", "MediaLimitInfo", "MediaLimits", "MediaTally", "evict_oldest_media",
           "known_limits", "media_of", "parse_media_limit", "request_bytes"]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
