"""At most four ``cache_control`` marks in an Anthropic request: the latest are kept.

Anthropic refuses a request whose blocks carry more ("A maximum of 4 blocks with cache_control may be provided").
A caller that marks each new message, as Anthropic's guide to caching a conversation does (the mark moves to the
last block every turn), adds the marked message to the manager's history, where the marks of earlier turns stay:
from the fifth turn on, every request was refused. The latest marks cover the longest prefixes; the earlier ones
are those the caller would have moved on. The request is rendered tools, system, messages: that is the order.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_CACHE_MARKS", "keep_latest_marks"]

MAX_CACHE_MARKS = 4
_MARK = "cache_control"


def keep_latest_marks(request: dict[str, Any], limit: int = MAX_CACHE_MARKS) -> dict[str, Any]:
    """``request`` (tools, system, messages) with its earliest ``cache_control`` marks dropped past ``limit``.

    A top-level ``cache_control`` (automatic caching) counts against the limit and stays. ``request`` and what it
    holds are left as they are (the caller's tools and system blocks among them): what changes is copied.
    """
    allowed = limit - (1 if isinstance(request.get(_MARK), dict) else 0)
    marked = _marks_of(request)
    if marked <= max(allowed, 0):
        return request
    drop = marked - max(allowed, 0)
    out = dict(request)
    for key in ("tools", "system"):
        blocks = out.get(key)
        if isinstance(blocks, list) and drop:
            out[key], drop = _unmarked(blocks, drop)
    messages = out.get("messages")
    if isinstance(messages, list) and drop:
        kept: list[Any] = []
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if drop and isinstance(content, list):
                content, drop = _unmarked(content, drop)
                message = {**message, "content": content}
            kept.append(message)
        out["messages"] = kept
    return out


def _unmarked(blocks: list[Any], drop: int) -> tuple[list[Any], int]:
    """``blocks`` without their first ``drop`` marks (nested tool results included); the marks still to drop."""
    out: list[Any] = []
    for block in blocks:
        if drop and isinstance(block, dict):
            nested = block.get("content")  # (a tool result's blocks come before the mark on the result itself)
            if isinstance(nested, list):
                nested, drop = _unmarked(nested, drop)
                block = {**block, "content": nested}
            if drop and _MARK in block:
                block = {k: v for k, v in block.items() if k != _MARK}
                drop -= 1
        out.append(block)
    return out, drop


def _count(blocks: list[Any]) -> int:
    """Marks on ``blocks`` and on the blocks nested in them (a tool result's). A plain loop: it runs every call."""
    count = 0
    for block in blocks:
        if type(block) is dict:
            if _MARK in block:
                count += 1
            nested = block.get("content")
            if type(nested) is list:
                count += _count(nested)
    return count


def _marks_of(request: dict[str, Any]) -> int:
    count = 0
    for key in ("tools", "system"):
        blocks = request.get(key)
        if type(blocks) is list:
            count += _count(blocks)
    for message in request.get("messages") or ():
        content = message.get("content") if type(message) is dict else None
        if type(content) is list:
            count += _count(content)
    return count
