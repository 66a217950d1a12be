"""Parts of the Gemini ``contents`` format other than functionCall / functionResponse."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidHistory
from ..messages import DocumentPart, ImagePart, Part, TextPart, ThinkingPart, UnknownPart
from ._common import expect_list, expect_mapping, expect_str, make_extra, placeholder, plain, split_extra
from .opaque import tag_origin

__all__ = ["NAME", "check_camel_case", "decode_part", "decode_parts", "encode_part", "encode_parts", "is_plain_text"]

NAME = "gemini"

_INLINE_KEYS = frozenset({"mimeType", "data"})
# The Python SDK's default model_dump() spells these in snake_case; the REST API (and this module) use camelCase.
_SNAKE_KEYS = frozenset({"function_call", "function_response", "inline_data", "file_data", "thought_signature"})
_FILE_KEYS = frozenset({"mimeType", "fileUri"})


def decode_parts(value: Any, index: int, field: str) -> tuple[Part, ...]:
    """A ``parts`` array (without function calls or responses)."""
    return tuple(decode_part(p, index, f"{field}[{k}]") for k, p in enumerate(expect_list(value, index, field)))


def check_camel_case(part: Mapping[str, Any], index: int, field: str) -> None:
    """Refuse SDK-style snake_case parts instead of silently keeping a function call as an unknown part."""
    snake = sorted(_SNAKE_KEYS & set(part))
    if snake:
        problem = (
            f"snake_case key {snake[0]!r}: pass the REST (camelCase) form, "
            "e.g. content.model_dump(by_alias=True, exclude_none=True)"
        )
        raise InvalidHistory(problem, index=index, field=field)


def decode_part(raw: Any, index: int, field: str) -> Part:
    """One part; kinds contextfold does not model (executableCode, videoMetadata, …) become UnknownPart."""
    raw = expect_mapping(raw, index, field)
    check_camel_case(raw, index, field)
    if "text" in raw:
        text = expect_str(raw["text"], index, f"{field}.text")
        if raw.get("thought") is True:
            signature = raw.get("thoughtSignature")
            if signature is not None:
                expect_str(signature, index, f"{field}.thoughtSignature")
            extra = make_extra(NAME, raw, ("text", "thought", "thoughtSignature"))
            if signature is not None:  # Gemini's state: readable by Gemini only (formats/opaque.py)
                extra = tag_origin(extra, NAME)
            return ThinkingPart(text, signature, extra=extra)
        return TextPart(text, extra=make_extra(NAME, raw, ("text",)))
    inline = raw.get("inlineData")
    if isinstance(inline, Mapping) and set(inline) == _INLINE_KEYS and _strings(inline):
        extra = make_extra(NAME, raw, ("inlineData",))
        if inline["mimeType"].startswith("image/"):
            return ImagePart(None, inline["data"], inline["mimeType"], extra=extra)
        return DocumentPart(None, inline["data"], None, inline["mimeType"], extra=extra)
    file = raw.get("fileData")
    if isinstance(file, Mapping) and "fileUri" in file and set(file) <= _FILE_KEYS and _strings(file):
        extra = make_extra(NAME, raw, ("fileData",))
        media = file.get("mimeType")
        if media is not None and media.startswith("image/"):
            return ImagePart(file["fileUri"], None, media, extra=extra)
        return DocumentPart(file["fileUri"], None, None, media, extra=extra)
    return UnknownPart(plain(raw), NAME)


def _strings(mapping: Mapping[str, Any]) -> bool:
    return all(isinstance(v, str) for v in mapping.values())


def is_plain_text(part: Part) -> bool:
    """Whether ``part`` is text with nothing else to carry (so content can be a plain string)."""
    return isinstance(part, TextPart) and part.cache_control is None and not part.extra


def encode_parts(content: str | tuple[Part, ...]) -> list[dict[str, Any]]:
    """Content as a ``parts`` array; a string is one text part."""
    if isinstance(content, str):
        return [{"text": content}]
    return [encode_part(p) for p in content]


def encode_part(part: Part) -> dict[str, Any]:
    """One part (a visible placeholder for what Gemini cannot carry)."""
    passthrough, _ = split_extra(part.extra, NAME)
    out: dict[str, Any]
    if isinstance(part, ThinkingPart):
        out = {"text": part.text, "thought": True}
        if part.signature is not None:
            out["thoughtSignature"] = part.signature
    elif isinstance(part, TextPart):
        out = {"text": part.text}
    elif isinstance(part, ImagePart | DocumentPart) and part.data is not None:
        out = {"inlineData": {"mimeType": part.media_type or _default_type(part), "data": part.data}}
    elif isinstance(part, ImagePart | DocumentPart) and part.url is not None:
        file = {"fileUri": part.url}
        if part.media_type is not None:
            file = {"mimeType": part.media_type, **file}
        out = {"fileData": file}
    elif isinstance(part, UnknownPart) and part.format in (NAME, ""):
        return plain(part.data)  # type: ignore[no-any-return]
    else:
        kind = part.data.get("type", "part") if isinstance(part, UnknownPart) else part.type
        return {"text": placeholder(f"{kind} part", NAME)}
    out.update((k, v) for k, v in passthrough.items() if k not in out)
    return out


def _default_type(part: ImagePart | DocumentPart) -> str:
    # Gemini needs a MIME type for inline data; the generic ones are the least wrong guess.
    return "image/png" if isinstance(part, ImagePart) else "application/octet-stream"
