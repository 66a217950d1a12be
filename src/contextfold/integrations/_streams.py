"""Streamed calls of the client wrappers: the SDK's events pass through, the reply is recorded when they end.

A wrapper called with ``stream=True`` prepares the view and opens the stream inside the recovery loop (providers
answer a context-length error before the first event, so recovery works as for a plain call), then returns a
:class:`ManagedStream`: iterating it yields the SDK's own chunks or events unchanged; once the last one is read,
the usage is recorded and the assembled reply is added to the history (``final`` holds it). A stream closed
before its end adds nothing: the reply was never whole. Neither does a stream that ends without its API's final
event (a dropped connection, a proxy's timeout: the SDKs see a normal end of the events): its end raises
:class:`~contextfold.errors.IncompleteStream`, and so does ``final`` afterwards.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from ..errors import IncompleteStream

__all__ = ["AsyncManagedStream", "ManagedStream", "anthropic_final", "awaitable", "chat_accumulator",
           "responses_final"]


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
        self._failure: IncompleteStream | None = None

    def __iter__(self) -> Iterator[Any]:
        for event in self._events:
            self._collect(event)
            yield event
        self._end()

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            self._final = self._final_of()
        except IncompleteStream as failure:
            self._failure = failure
            raise
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
        if self._failure is not None:
            raise self._failure
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
        self._failure: IncompleteStream | None = None

    async def __aiter__(self) -> AsyncIterator[Any]:
        async for event in self._events:
            self._collect(event)
            yield event
        if not self._ended:
            self._ended = True
            try:
                self._final = await self._final_of()
            except IncompleteStream as failure:
                self._failure = failure
                raise
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
        if self._failure is not None:
            raise self._failure
        return self._final

    async def close(self) -> None:
        """Close the SDK's stream."""
        await self._close()

    async def __aenter__(self) -> AsyncManagedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def chat_accumulator() -> tuple[Callable[[Any], None], Callable[[], Any]]:
    """(collect, final) assembling Chat Completions chunks into the ChatCompletion (the SDK's own helper).

    The reply is whole once every choice the chunks named has its ``finish_reason`` (the usage chunk follows it).
    """
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state: Any = ChatCompletionStreamState()
    started: set[int] = set()
    finished: set[int] = set()
    unreadable: list[str] = []

    def collect(chunk: Any) -> None:
        if unreadable:
            return
        try:
            state.handle_chunk(chunk)
        except Exception as exc:  # (a tool-call delta with "index": null: the SDK alone iterates it; so must we)
            unreadable.append(f"{type(exc).__name__}: {exc}"[:200])
            return
        for choice in getattr(chunk, "choices", None) or ():
            started.add(choice.index)
            if choice.finish_reason is not None:
                finished.add(choice.index)

    def final() -> Any:
        if unreadable:
            raise IncompleteStream("chat", "", unreadable=unreadable[0])
        if not started or started - finished:
            raise IncompleteStream("chat", "a chunk with each choice's finish_reason")
        return state.get_final_completion()

    return collect, final


def responses_final() -> tuple[Callable[[Any], None], Callable[[], Any]]:
    """(collect, final) keeping the whole Response the last Responses event carries."""
    held: list[Any] = []

    def collect(event: Any) -> None:
        if getattr(event, "type", None) in ("response.completed", "response.incomplete", "response.failed"):
            held.append(event.response)

    def final() -> Any:
        if not held:
            raise IncompleteStream("responses", "response.completed, response.incomplete or response.failed")
        return held[-1]

    return collect, final


def anthropic_final(opened: Any) -> tuple[Callable[[Any], None], Callable[[], Any]]:
    """(collect, final) for the Anthropic SDK's message stream ``opened``: whole once ``message_stop`` came.

    ``final`` returns what ``opened.get_final_message()`` returns (a coroutine, for the async SDK's stream).
    """
    stopped: list[bool] = []

    def collect(event: Any) -> None:
        if getattr(event, "type", None) == "message_stop":
            stopped.append(True)

    def final() -> Any:
        if not stopped:
            raise IncompleteStream("anthropic", "message_stop")
        return opened.get_final_message()

    return collect, final


def awaitable(function: Callable[[], Any]) -> Callable[[], Awaitable[Any]]:
    """``function`` as a coroutine function (an async stream's ``final``)."""
    async def run() -> Any:
        return function()

    return run
