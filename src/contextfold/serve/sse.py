"""Server-sent events as the providers send them: split a byte stream into events without waiting for its end.

Each :class:`SseEvent` keeps its raw bytes, so that the proxy forwards exactly what the upstream sent (no
re-encoding on the hot path) and reads only the events it needs (usage, the reply's tool calls).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["SseEvent", "SseSplitter", "encode_event", "events"]

# An event ends at a blank line; servers use \n, \r\n or \r line ends (the SSE specification allows all three).
_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")
# A stream that sends this much without a blank line is not SSE: pass what is buffered through as it is.
_MAX_EVENT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event: its raw bytes (boundary included), its ``event:`` name and its ``data:`` text."""

    raw: bytes
    name: str
    data: str

    def json(self) -> Any:
        """The data as JSON, or None when it is not (``[DONE]``, a comment, a keep-alive)."""
        if not self.data or self.data == "[DONE]":
            return None
        try:
            return json.loads(self.data)
        except ValueError:
            return None


def _parse(raw: bytes) -> SseEvent:
    name = ""
    data: list[str] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    return SseEvent(raw, name, "\n".join(data))


class SseSplitter:
    """Feed bytes as they arrive, get back the events they complete."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> Iterator[SseEvent]:
        """The events completed by ``chunk``."""
        self._buffer += chunk
        while True:
            match = _BOUNDARY.search(self._buffer)
            if match is None:
                if len(self._buffer) > _MAX_EVENT_BYTES:
                    raw, self._buffer = self._buffer, b""
                    yield SseEvent(raw, "", "")
                return
            raw, self._buffer = self._buffer[:match.end()], self._buffer[match.end():]
            if raw.strip():
                yield _parse(raw)

    def rest(self) -> Iterator[SseEvent]:
        """What is left at the end of the stream (an event without its final blank line)."""
        raw, self._buffer = self._buffer, b""
        if raw.strip():
            yield _parse(raw + b"\n\n")


async def events(chunks: AsyncIterator[bytes]) -> AsyncIterator[SseEvent]:
    """The events of a byte stream, each as soon as its blank line arrives."""
    splitter = SseSplitter()
    async for chunk in chunks:
        for event in splitter.feed(chunk):
            yield event
    for event in splitter.rest():
        yield event


def encode_event(data: Any, name: str | None = None) -> bytes:
    """An event of our own making (a rewritten one): ``event:`` line when named, JSON data."""
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()
