"""Streamed calls of the client wrappers: the SDK's events pass through, the reply is recorded when they end.

A wrapper called with ``stream=True`` prepares the view and opens the stream inside the recovery loop (providers
answer a context-length error before the first event, so recovery works as for a plain call), then returns a
:class:`ManagedStream`: iterating it yields the SDK's own chunks or events unchanged; once the last one is read,
the usage is recorded and the assembled reply is added to the history (``final`` holds it). A stream closed
before its end adds nothing: the reply was never whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

__all__ = ["AsyncManagedStream", "ManagedStream", "awaitable", "chat_accumulator", "responses_final"]


class ManagedStream:
    """The SDK's stream of one call, passed through; at its end the reply goes to the manager.

    Args:
        events: The SDK's stream (iterable of chunks or events).
        collect: Sees every event (assembles the reply).
        final: The assembled reply, once the stream has ended.
        done: Records the reply (usage, history).
        close: Closes the SDK's stream.
    """

    def __init__(self, events: Any, *, collect: Callable[[Any], None], final: Callable[[], Any],
                 done: Callable[[Any], None], close: Callable[[], None]) -> None:
        self._events = events
        self._collect = collect
        self._final_of = final
        self._done = done
        self._close = close
        self._final: Any = None
        self._ended = False

    def __iter__(self) -> Iterator[Any]:
        for event in self._events:
            self._collect(event)
            yield event
        self._end()

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        self._final = self._final_of()
        self._done(self._final)

    def until_done(self) -> Any:
        """Read the rest of the stream; the assembled reply."""
        for _ in self:
            pass
        return self.final

    @property
    def final(self) -> Any:
        """The reply assembled from the stream (the SDK's ChatCompletion, Response or Message)."""
        if not self._ended:
            raise RuntimeError("the stream has not ended: iterate it to the end (or call until_done()) first")
        return self._final

    def close(self) -> None:
        """Close the SDK's stream (a reply not read to its end is not added to the history)."""
        self._close()

    def __enter__(self) -> ManagedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncManagedStream:
    """The async twin of :class:`ManagedStream` (``async for``)."""

    def __init__(self, events: Any, *, collect: Callable[[Any], None], final: Callable[[], Awaitable[Any]],
                 done: Callable[[Any], Awaitable[None]], close: Callable[[], Awaitable[None]]) -> None:
        self._events = events
        self._collect = collect
        self._final_of = final
        self._done = done
        self._close = close
        self._final: Any = None
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[Any]:
        async for event in self._events:
            self._collect(event)
            yield event
        if not self._ended:
            self._ended = True
            self._final = await self._final_of()
            await self._done(self._final)

    async def until_done(self) -> Any:
        """Read the rest of the stream; the assembled reply."""
        async for _ in self:
            pass
        return self.final

    @property
    def final(self) -> Any:
        """The reply assembled from the stream."""
        if not self._ended:
            raise RuntimeError("the stream has not ended: iterate it to the end (or await until_done()) first")
        return self._final

    async def close(self) -> None:
        """Close the SDK's stream."""
        await self._close()

    async def __aenter__(self) -> AsyncManagedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def chat_accumulator() -> tuple[Callable[[Any], None], Callable[[], Any]]:
    """(collect, final) assembling Chat Completions chunks into the ChatCompletion (the SDK's own helper)."""
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state: Any = ChatCompletionStreamState()
    return state.handle_chunk, state.get_final_completion


def responses_final() -> tuple[Callable[[Any], None], Callable[[], Any]]:
    """(collect, final) keeping the whole Response the last Responses event carries."""
    held: list[Any] = []

    def collect(event: Any) -> None:
        if getattr(event, "type", None) in ("response.completed", "response.incomplete", "response.failed"):
            held.append(event.response)

    def final() -> Any:
        if not held:
            raise RuntimeError("the Responses stream ended without its final response event")
        return held[-1]

    return collect, final


def awaitable(function: Callable[[], Any]) -> Callable[[], Awaitable[Any]]:
    """``function`` as a coroutine function (an async stream's ``final``)."""
    async def run() -> Any:
        return function()

    return run
