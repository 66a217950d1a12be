"""Content blocks of the Anthropic Messages format other than tool_use / tool_result."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidHistory
from ..messages import DocumentPart, ImagePart, Part, TextPart, ThinkingPart, UnknownPart
from ._common import expect_list, expect_mapping, expect_str, make_extra, placeholder, plain, split_extra, type_name
from .opaque import tag_origin

__all__ = ["NAME", "decode_block", "decode_blocks", "encode_block", "encode_content"]

NAME = "anthropic"

# Inline data without a media type (decoded from a format that does not name one) still needs one here.
DEFAULT_MEDIA_TYPE = "application/octet-stream"

_BASE64_KEYS = frozenset({"type", "media_type", "data"})
_URL_KEYS = frozenset({"type", "url"})
_FILE_KEYS = frozenset({"type", "file_id"})


def decode_blocks(value: Any, index: int, field: str) -> str | tuple[Part, ...]:
    """Content that is a string or a list of (non-tool) blocks."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list | tuple):
        problem = f"expected a string or an array of content blocks, got {type_name(value)}"
        raise InvalidHistory(problem, index=index, field=field)
    blocks = expect_list(value, index, field)
    return tuple(decode_block(b, index, f"{field}[{k}]") for k, b in enumerate(blocks))


def decode_block(raw: Any, index: int, field: str) -> Part:
    """One content block; kinds contextfold does not model become :class:`UnknownPart`."""
    raw = expect_mapping(raw, index, field)
    kind = expect_str(raw.get("type"), index, f"{field}.type", nonempty=True)
    cache = raw.get("cache_control")
    if kind == "text":
        text = expect_str(raw.get("text"), index, f"{field}.text")
        return TextPart(text, cache, make_extra(NAME, raw, ("type", "text", "cache_control")))
    if kind == "thinking":
        text = expect_str(raw.get("thinking"), index, f"{field}.thinking")
        signature = raw.get("signature")
        if signature is not None:
            expect_str(signature, index, f"{field}.signature")
        extra = make_extra(NAME, raw, ("type", "thinking", "signature", "cache_control"))
        if signature is not None:  # signed: Anthropic's state, readable by Anthropic only (formats/opaque.py)
            extra = tag_origin(extra, NAME)
        return ThinkingPart(text, signature, cache_control=cache, extra=extra)
    if kind == "redacted_thinking":
        data = expect_str(raw.get("data"), index, f"{field}.data")
        extra = tag_origin(make_extra(NAME, raw, ("type", "data", "cache_control")), NAME)
        return ThinkingPart("", None, True, data, cache, extra)
    source = raw.get("source")
    if kind in ("image", "document") and isinstance(source, Mapping):
        part = _decode_sourced(kind, raw, source)
        if part is not None:
            return part
    return UnknownPart(plain(raw), NAME)


def _decode_sourced(kind: str, raw: Mapping[str, Any], source: Mapping[str, Any]) -> Part | None:
    keys = set(source)
    if not all(isinstance(v, str) for v in source.values()):
        return None
    data = media = url = file_id = None
    if source.get("type") == "base64" and keys == _BASE64_KEYS:
        data, media = source["data"], source["media_type"]
    elif source.get("type") == "url" and keys == _URL_KEYS:
        url = source["url"]
    elif source.get("type") == "file" and keys == _FILE_KEYS and kind == "document":
        file_id = source["file_id"]
    else:
        return None
    cache = raw.get("cache_control")
    if kind == "image":
        return ImagePart(url, data, media, None, cache, make_extra(NAME, raw, ("type", "source", "cache_control")))
    title = raw.get("title")
    if title is not None and not isinstance(title, str):
        return None
    extra = make_extra(NAME, raw, ("type", "source", "title", "cache_control"))
    return DocumentPart(url, data, file_id, media, title, cache, extra)


def encode_content(content: str | tuple[Part, ...]) -> str | list[dict[str, Any]]:
    """Content as a string or a list of blocks."""
    if isinstance(content, str):
        return content
    return [encode_block(p) for p in content]


def encode_block(part: Part) -> dict[str, Any]:
    """One part as an Anthropic content block (a visible placeholder for what Anthropic cannot carry)."""
    passthrough, _ = split_extra(part.extra, NAME)
    out: dict[str, Any]
    if isinstance(part, TextPart):
        out = {"type": "text", "text": part.text}
    elif isinstance(part, ThinkingPart) and part.redacted:
        out = {"type": "redacted_thinking", "data": part.encrypted or ""}
    elif isinstance(part, ThinkingPart):
        out = {"type": "thinking", "thinking": part.text}
        if part.signature is not None:
            out["signature"] = part.signature
    elif isinstance(part, ImagePart | DocumentPart) and (part.url is not None or part.data is not None):
        out = {"type": "image" if isinstance(part, ImagePart) else "document", "source": _source(part)}
        if isinstance(part, DocumentPart) and part.title is not None:
            out["title"] = part.title
    elif isinstance(part, DocumentPart) and part.file_id is not None:
        out = {"type": "document", "source": {"type": "file", "file_id": part.file_id}}
        if part.title is not None:
            out["title"] = part.title
    elif isinstance(part, UnknownPart) and part.format in (NAME, ""):
        return plain(part.data)  # type: ignore[no-any-return]
    else:
        kind = part.data.get("type", "part") if isinstance(part, UnknownPart) else part.type
        return {"type": "text", "text": placeholder(f"{kind} part", NAME)}
    if part.cache_control is not None:
        out["cache_control"] = plain(part.cache_control)
    out.update((k, v) for k, v in passthrough.items() if k not in out)
    return out


def _source(part: ImagePart | DocumentPart) -> dict[str, Any]:
    if part.data is not None:
        return {"type": "base64", "media_type": part.media_type or DEFAULT_MEDIA_TYPE, "data": part.data}
    return {"type": "url", "url": part.url}
