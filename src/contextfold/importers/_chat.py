"""Decoding the OpenAI-Chat-shaped message dicts that recorders write, with errors located in the recording.

SWE-agent and tau-bench store their histories as (slightly extended) OpenAI Chat Completions messages. The
``openai_chat`` wire format decodes them, so that an imported session converts back to exactly what was recorded;
this module only re-locates its errors: the record in the file becomes the index and the message's path inside
the record (``traj[3]``) prefixes the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ..errors import InvalidHistory
from ..formats import openai_chat
from ..formats._common import expect_mapping, type_name
from ..messages import ROLES, Message, Role

__all__ = ["decode_chat", "decode_role", "expect_mapping", "join_field", "type_name"]


def join_field(prefix: str, name: str | None) -> str | None:
    """``name`` inside ``prefix`` (``traj[3]`` + ``role`` -> ``traj[3].role``); None when both are empty."""
    if not name:
        return prefix or None
    if not prefix:
        return name
    return f"{prefix}{name}" if name.startswith("[") else f"{prefix}.{name}"


def decode_role(value: Any, index: int, field: str | None) -> Role:
    """A role contextfold models, or an error listing the ones it does."""
    if not isinstance(value, str) or value not in ROLES:
        shown = repr(value) if isinstance(value, str) else type_name(value)
        expected = ", ".join(sorted(ROLES))
        raise InvalidHistory(f"unknown role {shown} (expected one of {expected})", index=index, field=field)
    return cast(Role, value)


def decode_chat(raw: Any, record: int, *, prefix: str = "", meta: Mapping[str, Any] | None = None) -> Message:
    """One Chat Completions message dict as a :class:`Message`.

    Args:
        raw: The parsed JSON value.
        record: The record index reported in errors.
        prefix: The path of the message inside the record (``"traj[3]"``), or "" when it is the record.
        meta: contextfold annotations to attach (the importers keep recorder-only keys here).
    """
    obj = expect_mapping(raw, record, prefix or None)
    decode_role(obj.get("role"), record, join_field(prefix, "role"))
    try:
        (message,) = openai_chat.decode([obj])
    except InvalidHistory as exc:
        raise InvalidHistory(exc.problem, index=record, field=join_field(prefix, exc.field)) from None
    return message.with_meta(**meta) if meta else message
