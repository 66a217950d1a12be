"""What the provider call wrappers share: checking the caller's keywords and recording a reply in the manager."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["afinish", "dump", "finish", "reject"]


def reject(kwargs: Mapping[str, Any], names: Iterable[str], where: str) -> None:
    """Refuse keywords the wrapper fills from the ContextManager, and streaming (whose usage comes too late)."""
    for name in names:
        if name in kwargs:
            raise ConfigError(f"the conversation comes from the ContextManager: add messages with cm.add(...) "
                              f"instead of passing {name}=", field=f"{where}.{name}")
    if kwargs.get("stream"):
        raise ConfigError("streaming is not supported by the wrapper (usage and the reply arrive in pieces); use "
                          "contextfold.recovery.call_with_recovery around your own streaming call",
                          field=f"{where}.stream")


def finish(cm: ContextManager, usage: Any, items: list[dict[str, Any]], *, format: str, add_reply: bool) -> None:
    """Ground the manager in the reported usage and append the reply to the history."""
    if usage is not None:
        cm.record_usage(usage)
    if add_reply and items:
        cm.add(items, format=format)


async def afinish(cm: ContextManager, usage: Any, items: list[dict[str, Any]], *, format: str,
                  add_reply: bool) -> None:
    """Async :func:`finish`."""
    if usage is not None:
        await cm.arecord_usage(usage)
    if add_reply and items:
        await cm.aadd(items, format=format)


def dump(obj: Any) -> dict[str, Any]:
    """An SDK object (pydantic) or a dict as a plain dict without None values."""
    if isinstance(obj, Mapping):
        return {k: v for k, v in obj.items() if v is not None}
    dumped: dict[str, Any] = obj.model_dump(exclude_none=True)
    return dumped
