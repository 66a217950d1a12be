"""Recovery from "context length exceeded": every provider's error classified, then compact and retry.

A request refused for its media (``413 request_too_large``, ``Too much media: ... > 100``) is recovered the same
way: :func:`parse_limit_error` reads either kind, and :meth:`OverflowRecovery.shrink` takes the oldest images and
documents out after learning the media limit (:func:`media_ceiling`, kept by the manager; see
:mod:`contextfold.media`).

Contract: :func:`parse_overflow` (``overflow``) reads an exception or error body into :class:`OverflowInfo`;
:func:`call_with_recovery` / :func:`acall_with_recovery` compact (or drop the oldest) and retry at most three
times, with a stall guard and the manager's circuit breaker. Every error teaches the manager the provider's limit
(:func:`learned_ceiling`, below the rejected request): each retry is strictly smaller than what was rejected, and
later turns keep under the limit (``ContextManager.learn_limit``). What a shared store keeps for every caller of the
model is :func:`shared_ceiling`, without the part one request's own ``max_tokens`` took off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._recovery import (
        CIRCUIT_BREAKER_FAILURES,
        DEFAULT_MAX_RETRIES,
        MIN_WINDOW_SHARE,
        STALL_SHRINK_RATIO,
        OverflowRecovery,
        acall_with_recovery,
        call_with_recovery,
        counted_tokens,
        drop_oldest,
        essential_tokens,
        learned_ceiling,
        media_ceiling,
        parse_limit_error,
        shared_ceiling,
    )
    from .overflow import OVERFLOW_CODES, ErrorReading, OverflowInfo, parse_overflow, read_error

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "CIRCUIT_BREAKER_FAILURES": "._recovery",
    "DEFAULT_MAX_RETRIES": "._recovery",
    "ErrorReading": ".overflow",
    "MIN_WINDOW_SHARE": "._recovery",
    "OVERFLOW_CODES": ".overflow",
    "OverflowInfo": ".overflow",
    "OverflowRecovery": "._recovery",
    "STALL_SHRINK_RATIO": "._recovery",
    "acall_with_recovery": "._recovery",
    "call_with_recovery": "._recovery",
    "counted_tokens": "._recovery",
    "drop_oldest": "._recovery",
    "essential_tokens": "._recovery",
    "learned_ceiling": "._recovery",
    "media_ceiling": "._recovery",
    "parse_limit_error": "._recovery",
    "parse_overflow": ".overflow",
    "read_error": ".overflow",
    "shared_ceiling": "._recovery",
}
__all__ = [
    "CIRCUIT_BREAKER_FAILURES", "DEFAULT_MAX_RETRIES", "MIN_WINDOW_SHARE", "OVERFLOW_CODES", "STALL_SHRINK_RATIO",
    "ErrorReading", "OverflowInfo", "OverflowRecovery", "acall_with_recovery", "call_with_recovery", "counted_tokens",
    "drop_oldest", "essential_tokens", "learned_ceiling", "media_ceiling", "parse_limit_error", "parse_overflow",
    "read_error", "shared_ceiling",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
