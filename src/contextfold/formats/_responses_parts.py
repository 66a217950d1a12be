"""Content parts and reasoning items of the OpenAI Responses format (kept apart so the item logic stays short)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidHistory
from ..messages import DocumentPart, ImagePart, Part, TextPart, ThinkingPart, UnknownPart
from ._common import (
    apply_hints,
    data_url,
    expect_list,
    expect_mapping,
    expect_str,
    make_extra,
    parse_data_url,
    placeholder,
    plain,
    split_extra,
    type_name,
)

__all__ = ["decode_content", "encode_content", "encode_thinking"]

# Inline data without a media type (decoded from a format that does not name one) still needs a data URL.
DEFAULT_MEDIA_TYPE = "application/octet-stream"

_TEXT_TYPES = frozenset({"input_text", "output_text"})
_IMAGE_KEYS = frozenset({"type", "image_url", "detail"})
_FILE_KEYS = frozenset({"type", "file_id", "file_data", "filename", "file_url"})


def _text_type(role: str) -> str:
    # The API wants output_text in assistant messages and input_text everywhere else (tool outputs included).
    return "output_text" if role == "assistant" else "input_text"


def decode_content(value: Any, index: int, field: str, role: str, fmt: str) -> str | tuple[Part, ...]:
    """Message content or function output: a string, or a list of typed parts."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list | tuple):
        problem = f"expected a string or an array of parts, got {type_name(value)}"
        raise InvalidHistory(problem, index=index, field=field)
    parts = expect_list(value, index, field)
    return tuple(_decode_part(p, index, f"{field}[{k}]", role, fmt) for k, p in enumerate(parts))


def _decode_part(raw: Any, index: int, field: str, role: str, fmt: str) -> Part:
    raw = expect_mapping(raw, index, field)
    kind = expect_str(raw.get("type"), index, f"{field}.type", nonempty=True)
    if kind in _TEXT_TYPES:
        text = expect_str(raw.get("text"), index, f"{field}.text")
        hints = {"text_type": kind} if kind != _text_type(role) else None
        return TextPart(text, extra=make_extra(fmt, raw, ("type", "text"), hints))
    if kind == "input_image" and set(raw) <= _IMAGE_KEYS and isinstance(raw.get("image_url"), str):
        detail = raw.get("detail")
        extra = make_extra(fmt, raw, _IMAGE_KEYS)
        inline = parse_data_url(raw["image_url"])
        if inline is not None:
            return ImagePart(None, inline[1], inline[0], detail, extra=extra)
        return ImagePart(raw["image_url"], None, None, detail, extra=extra)
    if kind == "input_file" and _is_document(raw):
        inline = parse_data_url(raw["file_data"]) if "file_data" in raw else None
        return DocumentPart(
            url=raw.get("file_url"),
            data=inline[1] if inline else None,
            file_id=raw.get("file_id"),
            media_type=inline[0] if inline else None,
            title=raw.get("filename"),
        )
    return UnknownPart(plain(raw), fmt)


def _is_document(raw: Mapping[str, Any]) -> bool:
    # Only shapes that come back byte for byte: known string keys, file_data a base64 data URL.
    if not set(raw) <= _FILE_KEYS or not all(isinstance(v, str) for v in raw.values()):
        return False
    if "file_data" in raw and parse_data_url(raw["file_data"]) is None:
        return False
    return bool({"file_id", "file_data", "file_url"} & set(raw))


def encode_content(content: str | tuple[Part, ...], role: str, fmt: str) -> str | list[dict[str, Any]]:
    """Content as the API takes it; thinking parts are left to the caller (they are separate items)."""
    if isinstance(content, str):
        return content
    return [_encode_part(p, role, fmt) for p in content if not isinstance(p, ThinkingPart)]


def _encode_part(part: Part, role: str, fmt: str) -> dict[str, Any]:
    passthrough, hints = split_extra(part.extra, fmt)
    out: dict[str, Any]
    if isinstance(part, TextPart):
        out = {"type": hints.get("text_type", _text_type(role)), "text": part.text}
    elif isinstance(part, ImagePart):
        url = part.url if part.url is not None else data_url(part.media_type or DEFAULT_MEDIA_TYPE, part.data or "")
        out = {"type": "input_image", "image_url": url}
        if part.detail is not None:
            out["detail"] = part.detail
    elif isinstance(part, DocumentPart):
        out = {"type": "input_file"}
        if part.file_id is not None:
            out["file_id"] = part.file_id
        if part.data is not None:
            out["file_data"] = data_url(part.media_type or DEFAULT_MEDIA_TYPE, part.data)
        if part.title is not None:
            out["filename"] = part.title
        if part.url is not None:
            out["file_url"] = part.url
    elif isinstance(part, UnknownPart) and part.format in (fmt, ""):
        return plain(part.data)  # type: ignore[no-any-return]
    else:
        kind = part.data.get("type", "part") if isinstance(part, UnknownPart) else part.type
        return {"type": _text_type(role), "text": placeholder(f"{kind} part", fmt)}
    out.update((k, v) for k, v in passthrough.items() if k not in out)
    return out


def encode_thinking(part: ThinkingPart, fmt: str) -> dict[str, Any]:
    """A ``reasoning`` item; the summary text is the part's text (the original list when it was split)."""
    passthrough, hints = split_extra(part.extra, fmt)
    summary = hints.get("summary")
    if summary is None or "\n\n".join(str(s.get("text", "")) for s in summary) != part.text:
        summary = [{"type": "summary_text", "text": part.text}] if part.text else []
    out: dict[str, Any] = {"type": "reasoning", "summary": plain(summary)}
    if part.encrypted is not None:
        out["encrypted_content"] = part.encrypted
    out.update((k, v) for k, v in passthrough.items() if k not in out)
    apply_hints(out, hints)
    return out
