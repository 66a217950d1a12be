"""The async mirror of the ContextManager API: each call runs the sync one on a worker thread.

Summarization can take seconds (an LLM call); running it on a thread keeps the event loop free. ``asyncio`` is
imported by the first async call, not by ``import contextfold`` (it is a fifth of a bare import's time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..messages import Message
    from ..tokens import TokenUsage
    from ._build import CompactionReport

__all__ = ["AsyncMirror"]


class AsyncMirror:
    """Async versions of ``add``, ``prepare``, ``prepare_messages``, ``compact`` and ``record_usage``."""

    async def aadd(self, messages: Any, *, format: str | None = None) -> None:
        """Async :meth:`add`."""
        import asyncio

        sync: Any = self
        await asyncio.to_thread(sync.add, messages, format=format)

    async def aprepare(self, format: str = "openai_chat") -> Any:
        """Async :meth:`prepare` (summarization runs on a worker thread, never on the event loop)."""
        import asyncio

        sync: Any = self
        return await asyncio.to_thread(sync.prepare, format)

    async def aprepare_messages(self) -> list[Message]:
        """Async :meth:`prepare_messages`."""
        import asyncio

        sync: Any = self
        result: list[Message] = await asyncio.to_thread(sync.prepare_messages)
        return result

    async def acompact(self, *, force: bool = True, instructions: str | None = None) -> CompactionReport:
        """Async :meth:`compact`."""
        import asyncio

        sync: Any = self
        report: CompactionReport = await asyncio.to_thread(lambda: sync.compact(force=force,
                                                                               instructions=instructions))
        return report

    async def arecord_usage(self, usage: Any) -> TokenUsage:
        """Async :meth:`record_usage` (no I/O: runs inline)."""
        sync: Any = self
        parsed: TokenUsage = sync.record_usage(usage)
        return parsed
