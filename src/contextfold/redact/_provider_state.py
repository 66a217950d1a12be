"""The readable text of a provider's opaque state, redacted in what contextfold stores or hands elsewhere.

The view leaves a signed thinking block or an encrypted reasoning item byte for byte: it goes back to the provider
that wrote it, whose signature check one changed character fails (``messages.is_opaque``). Its text is readable
though, and a transcript, a summarizer's input or a CLI output must not hold a secret in it. A part whose text held
one keeps the redacted text and loses its signature, encrypted content and format tag: restored, it is plain
reasoning, which the formats that need provider state drop (``formats/opaque.readable``) instead of sending a forged
signature.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from operator import attrgetter

from ..formats._common import WIRE_KEY
from ..messages import Message, ThinkingPart, freeze, is_opaque

__all__ = ["redact_provider_state"]


def redact_provider_state(messages: Sequence[Message], redact_text: Callable[[str], str]) -> list[Message]:
    """``messages`` with the text of their opaque thinking parts redacted; unchanged messages as the same objects."""
    if set(map(type, map(_CONTENT, messages))) <= {str}:
        return list(messages)  # (text only, as most histories are: no part to look at, found in one C loop)
    out: list[Message] = []
    for m in messages:
        if isinstance(m.content, str) or not any(_readable_state(p) for p in m.content):
            out.append(m)
            continue
        parts = tuple(_unsigned_if_secret(p, redact_text) if isinstance(p, ThinkingPart) and _readable_state(p) else p
                      for p in m.content)
        out.append(m if all(a is b for a, b in zip(parts, m.content, strict=True)) else replace(m, content=parts))
    return out


_CONTENT = attrgetter("content")


def _readable_state(part: object) -> bool:
    return isinstance(part, ThinkingPart) and is_opaque(part) and bool(part.text)


def _unsigned_if_secret(part: ThinkingPart, redact_text: Callable[[str], str]) -> ThinkingPart:
    text = redact_text(part.text)
    if text == part.text:
        return part
    extra = {k: v for k, v in part.extra.items() if k != WIRE_KEY}
    return replace(part, text=text, signature=None, encrypted=None, redacted=False, extra=freeze(extra))
