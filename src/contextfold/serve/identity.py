"""Who is calling and which session a request belongs to.

A caller is known only by a hash of its API key (the key itself is forwarded upstream and never kept). A session is
named, in this order, by the ``x-contextfold-session`` header, by the request's own conversation handle where the
API has one (Responses ``previous_response_id`` / ``conversation``), or by a fingerprint of the conversation's
opening (the items up to its first user message); a conversation that opens alike and then parts from that
session's is a fork of its own (``serve.sessions.follow_forks``). Every session id mixes in the caller's hash, so
two callers naming the same session, or opening with the same prompt, never share one: neither reaches the other's
cached outputs or history.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["SESSION_HEADER", "TOKEN_HEADER", "caller_key", "caller_scope", "opening_fingerprint", "session_id",
           "token_matches"]

SESSION_HEADER = "x-contextfold-session"
TOKEN_HEADER = "x-contextfold-token"
# Where SDKs put the API key: OpenAI (Bearer), Anthropic, Azure OpenAI.
_KEY_HEADERS = ("authorization", "x-api-key", "api-key")
# 128 bits: collisions between callers or sessions are out of reach, ids stay short enough for any store.
_DIGEST_BYTES = 16
# A session id is hex behind this prefix: valid for every store and archive layout, and says where it came from.
SESSION_PREFIX = "px"
# Anthropic's prompt-cache mark: where a client wants a cache entry, not what its conversation says.
CACHE_MARK = "cache_control"
# A header-named session longer than this is refused: it becomes part of a hash, but a megabyte header is abuse.
MAX_SESSION_NAME = 512


def caller_key(headers: Mapping[str, str]) -> str:
    """The caller's API key as sent (``Authorization: Bearer …``, ``x-api-key``, ``api-key``); "" when none."""
    for name in _KEY_HEADERS:
        value = headers.get(name)
        if value:
            return value[7:].strip() if name == "authorization" and value[:7].lower() == "bearer " else value.strip()
    return ""


def caller_scope(key: str, salt: str = "") -> str:
    """A hash of the caller's key (salted per deployment): what sessions are scoped to. Never the key itself."""
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=_DIGEST_BYTES,
                             key=salt.encode()[:64], person=b"cf-serve-caller")
    return digest.hexdigest()


def session_id(scope: str, kind: str, name: str) -> str:
    """The session id of ``name`` (of ``kind``: header, response, conversation, opening) for the caller ``scope``."""
    data = json.dumps([scope, kind, name], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return SESSION_PREFIX + hashlib.blake2b(data, digest_size=_DIGEST_BYTES, person=b"cf-serve-sess").hexdigest()


def opening_fingerprint(items: Sequence[Any]) -> str:
    """A fingerprint of the conversation's opening: its items up to and including the first user message.

    Without ``cache_control`` marks: a client that marks its last message marks the opening's user message on the
    first request only (the conversation was named twice, its first turn left in a session of its own).
    """
    opening: list[Any] = []
    for item in items:
        opening.append(_unmarked(item))
        if isinstance(item, Mapping) and item.get("role") == "user":
            break
    data = json.dumps(opening, sort_keys=True, ensure_ascii=False, default=repr).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=_DIGEST_BYTES).hexdigest()


def _unmarked(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _unmarked(v) for k, v in value.items() if k != CACHE_MARK}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def token_matches(sent: str | None, expected: str) -> bool:
    """Constant-time comparison of the token a caller sent with the configured one."""
    return sent is not None and hmac.compare_digest(sent.encode(), expected.encode())
