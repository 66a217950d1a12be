"""LangChain messages <-> contextfold Messages.

Each LangChain message becomes one Message whose ``meta["id"]`` names the LangChain message it came from. Going
back, a Message the manager did not change is answered with the very LangChain message it came from (ids, metadata
and usage intact); a changed one (a masked tool output, a truncated observation) is rebuilt on the original as a
template; new ones (summaries, placeholders) get deterministic ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidHistory, MissingExtra
from ..formats._common import WIRE_KEY
from ..messages import ImagePart, Message, Part, Role, TextPart, ToolCall, UnknownPart

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("the LangChain integration", "langchain", module="langchain_core") from exc

__all__ = ["FORMAT", "Origins", "from_langchain", "message_from_langchain", "to_langchain"]

# The format name recorded on content blocks contextfold does not model, so they go back unchanged.
FORMAT = "langchain"
# Prefix of the ids given to messages the manager created (summaries, placeholders, synthetic results).
NEW_ID_PREFIX = "contextfold-"
# Characters of the fingerprint in a new message's id: unique enough within one conversation, short in logs.
NEW_ID_DIGEST_CHARS = 16

# meta keys of the messages the manager makes (summaries, retained facts, cut outputs) that travel with the
# LangChain message in ``response_metadata["contextfold"]`` (never sent to the provider): a manager that rebuilds
# its view from a checkpointed state in a new process knows its summary for what it is.
PRESERVED_META = ("kind", "summary_version", "compacted_count", "original_token_count", "summary_token_count",
                  "compacted_at", "retain_facts", "ref")
META_KEY = "contextfold"

_ROLES: dict[str, Role] = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant",
                           "system": "system", "developer": "developer", "tool": "tool"}


@dataclass(frozen=True, slots=True)
class _Origin:
    message: BaseMessage
    fingerprint: str


class Origins:
    """The LangChain messages behind the manager's Messages, by ``meta["id"]``."""

    def __init__(self) -> None:
        self._by_key: dict[str, _Origin] = {}

    def remember(self, key: str, message: BaseMessage, converted: Message) -> None:
        """Record that ``converted`` came from ``message``."""
        self._by_key[key] = _Origin(message, converted.fingerprint())

    def get(self, key: Any) -> _Origin | None:
        """The origin recorded under ``key``, if any."""
        return self._by_key.get(key) if isinstance(key, str) else None

    def reidentify(self, message: BaseMessage, replacement: BaseMessage) -> None:
        """Answer with ``replacement`` (the same message under another id) where ``message`` was the answer."""
        for key, origin in self._by_key.items():
            if origin.message is message:
                self._by_key[key] = _Origin(replacement, origin.fingerprint)

    def keep_only(self, keys: Iterable[Any]) -> None:
        """Forget the origins of messages that left the view (the archive has them)."""
        wanted = {k for k in keys if isinstance(k, str)}
        self._by_key = {k: v for k, v in self._by_key.items() if k in wanted}

    def __len__(self) -> int:
        return len(self._by_key)


def _key(message: BaseMessage, index: int) -> str:
    return f"lc:{message.id}" if message.id else f"lc-anon:{index}:{id(message)}"


def _content(content: Any, index: int) -> str | tuple[Part, ...]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidHistory(f"expected a string or a list of content blocks, got {type(content).__name__}",
                             index=index, field="content")
    parts: list[Part] = []
    for block in content:
        if isinstance(block, str):
            parts.append(TextPart(block))
        elif isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
            extra = {k: v for k, v in block.items() if k not in ("type", "text")}
            parts.append(TextPart(block["text"], extra=extra))
        elif isinstance(block, Mapping):
            parts.append(_image(block) or UnknownPart(data=dict(block), format=FORMAT))
        else:
            raise InvalidHistory(f"content block of type {type(block).__name__} is neither a string nor a dict",
                                 index=index, field="content")
    return tuple(parts)


# An image block as LangChain carries it, in any of its shapes (OpenAI's ``image_url``, LangChain's standard
# ``image`` block with ``base64`` / ``data`` / ``url``, Anthropic's ``source``): an ImagePart, so that it is counted
# as an image (not as the tokens of its base64) and media limits see it. ``extra[IMAGE_KEY]`` keeps the block without
# its payload and where the payload goes, so the block goes back in its own shape; tagged with the LangChain format
# (``WIRE_KEY``), so that no provider's encoder sends it (an untagged extra is passed through by every one).
IMAGE_KEY = "langchain_image"


def _image(block: Mapping[str, Any]) -> ImagePart | None:
    kind = block.get("type")
    path: tuple[str, ...]
    if kind == "image_url":
        inner = block.get("image_url")
        path = ("image_url", "url") if isinstance(inner, Mapping) else ("image_url",)
    elif kind == "image":
        source = block.get("source")
        if isinstance(source, Mapping):
            path = ("source", "data") if isinstance(source.get("data"), str) else ("source", "url")
        else:
            path = next(((key,) for key in ("base64", "data", "url") if isinstance(block.get(key), str)), ())
    else:
        return None
    payload: Any = block
    for key in path:
        payload = payload.get(key) if isinstance(payload, Mapping) else None
    if not path or not isinstance(payload, str):
        return None
    stripped = _without(block, path)
    source = block.get("source")
    media_type = block.get("mime_type") or (source.get("media_type") if isinstance(source, Mapping) else None)
    is_url = path[-1] in ("url", "image_url")
    return ImagePart(url=payload if is_url else None, data=None if is_url else payload,
                     media_type=media_type if isinstance(media_type, str) else None,
                     extra={IMAGE_KEY: {"block": stripped, "path": list(path)}, WIRE_KEY: {"format": FORMAT}})


def _without(block: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out = dict(block)
    if len(path) == 1:
        out.pop(path[0], None)
    else:
        out[path[0]] = _without(block[path[0]], path[1:])
    return out


def _image_block(part: ImagePart) -> dict[str, Any]:
    """The block an ImagePart came from, payload put back; an OpenAI ``image_url`` block for any other image."""
    kept = part.extra.get(IMAGE_KEY)
    payload = part.url if part.url is not None else part.data or ""
    if not isinstance(kept, Mapping):
        url = payload if part.url is not None else f"data:{part.media_type or 'image/png'};base64,{payload}"
        return {"type": "image_url", "image_url": {"url": url}}
    block = json.loads(json.dumps(kept["block"]))  # (a deep copy: the caller may change what it is handed)
    target = block
    path = list(kept["path"])
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = payload
    return dict(block)


def message_from_langchain(message: BaseMessage, index: int = 0) -> Message:
    """One LangChain message as a Message (``meta["id"]`` names it; see :func:`from_langchain`)."""
    role = _ROLES.get(message.role if isinstance(message, ChatMessage) else message.type)
    if role is None:
        raise InvalidHistory(f"unsupported LangChain message type {type(message).__name__} "
                             f"({message.type!r}); expected human, ai, system or tool messages", index=index,
                             field="type")
    content = _content(message.content, index)
    meta: dict[str, Any] = {"id": _key(message, index)}
    carried = (message.response_metadata or {}).get(META_KEY)
    if isinstance(carried, Mapping):
        meta.update({k: v for k, v in carried.items() if k in PRESERVED_META})
    if isinstance(message, AIMessage):
        calls = []
        for k, call in enumerate(message.tool_calls):
            if not call.get("id"):
                raise InvalidHistory(f"tool call {k} ({call.get('name')!r}) has no id", index=index,
                                     field="tool_calls")
            calls.append(ToolCall(str(call["id"]), call["name"], json.dumps(call.get("args") or {})))
        return Message("assistant", content, tuple(calls), meta=meta)
    if isinstance(message, ToolMessage):
        return Message("tool", content, tool_call_id=message.tool_call_id, name=message.name, meta=meta)
    return Message(role, content, meta=meta)


def from_langchain(messages: Sequence[BaseMessage], origins: Origins | None = None, *,
                   start: int = 0) -> list[Message]:
    """LangChain messages as Messages, recording where each came from in ``origins``."""
    out: list[Message] = []
    for offset, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise InvalidHistory(f"expected a LangChain message, got {type(message).__name__}",
                                 index=start + offset)
        converted = message_from_langchain(message, start + offset)
        if origins is not None:
            origins.remember(str(converted.meta["id"]), message, converted)
        out.append(converted)
    return out


def _blocks(content: str | tuple[Part, ...]) -> str | list[str | dict[str, Any]]:
    if isinstance(content, str):
        return content
    blocks: list[str | dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text, **dict(part.extra)})
        elif isinstance(part, UnknownPart) and part.format == FORMAT:
            blocks.append(dict(part.data))
        elif isinstance(part, ImagePart):
            blocks.append(_image_block(part))
        else:
            blocks.append({"type": "text", "text": getattr(part, "text", "") or f"[{part.type}]"})
    return blocks


def _tool_calls(message: Message) -> list[dict[str, Any]]:
    return [{"name": c.name, "args": c.parsed_arguments(), "id": c.id, "type": "tool_call"}
            for c in message.tool_calls]


def _carried(message: Message) -> dict[str, Any]:
    meta = {k: message.meta[k] for k in PRESERVED_META if k in message.meta}
    if isinstance(meta.get("retain_facts"), tuple):
        meta["retain_facts"] = list(meta["retain_facts"])
    return {META_KEY: meta} if meta else {}


def _rebuilt(message: Message, origin: BaseMessage | None, new_id: str) -> BaseMessage:
    content = _blocks(message.content)
    carried = _carried(message)
    if origin is not None:
        update: dict[str, Any] = {"content": content}
        if carried:
            update["response_metadata"] = {**(origin.response_metadata or {}), **carried}
        if isinstance(origin, AIMessage):
            update["tool_calls"] = _tool_calls(message)
        rebuilt: BaseMessage = origin.model_copy(update=update)
        return rebuilt
    if message.role == "assistant":
        return AIMessage(content=content, tool_calls=_tool_calls(message), id=new_id, response_metadata=carried)
    if message.role == "tool":
        return ToolMessage(content=content, tool_call_id=message.tool_call_id or "", name=message.name, id=new_id,
                           response_metadata=carried)
    if message.role in ("system", "developer"):
        return SystemMessage(content=content, id=new_id, response_metadata=carried)
    return HumanMessage(content=content, id=new_id, response_metadata=carried)


def to_langchain(messages: Sequence[Message], origins: Origins) -> list[BaseMessage]:
    """The manager's view as LangChain messages: originals where unchanged, rebuilt or new messages elsewhere.

    What is rebuilt or created is recorded in ``origins`` too, so the next call answers it with the same object
    (the adapter tells "nothing changed" by identity); origins of messages that left the view are forgotten.
    """
    out: list[BaseMessage] = []
    keys: list[str] = []
    seen: dict[str, int] = {}
    for index, message in enumerate(messages):
        fingerprint = message.fingerprint()
        key = message.meta.get("id")
        if not isinstance(key, str):
            # Messages the manager made (summaries, placeholders) carry no id: key them by content and occurrence.
            seen[fingerprint] = seen.get(fingerprint, 0) + 1
            key = f"fp:{fingerprint}:{seen[fingerprint]}"
        keys.append(key)
        origin = origins.get(key)
        if origin is not None and origin.fingerprint == fingerprint:
            out.append(origin.message)
            continue
        new_id = f"{NEW_ID_PREFIX}{fingerprint[:NEW_ID_DIGEST_CHARS]}-{index}"
        rebuilt = _rebuilt(message, origin.message if origin is not None else None, new_id)
        origins.remember(key, rebuilt, message)
        out.append(rebuilt)
    origins.keep_only(keys)
    return out
