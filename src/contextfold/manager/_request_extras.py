"""What every request carries beside the view: tool schemas, instructions in a field of their own, a response format.

They count against the window with the view (issue 21 §2: a provider limit is reached by what the request carries,
not by the messages alone). Adapters and client wrappers state them with every request; the count is redone only
when they change or when the counter's counts change (the exact tokenizer arrived, a recalibration), so a turn that
sends the same tools costs a comparison, not a count. Imports are deferred: ``from contextfold import
ContextManager`` loads this module and nothing else of the library's (tests/test_cold_start.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..tokens import MessageCounter

__all__ = ["RequestExtras"]


class RequestExtras:
    """The extras of the requests a manager prepares, and their tokens by the manager's counter."""

    def __init__(self, counter: MessageCounter, tools: Sequence[Mapping[str, Any]] = ()) -> None:
        self._counter = counter
        self.tools: list[Mapping[str, Any]] = list(tools)
        self.instructions: str | None = None
        self.response_format: Mapping[str, Any] | None = None
        self._key: str | None = None  # what was last stated, so the same statement is not counted again
        self._tokens = self._count()
        self._revision = counter.revision

    @property
    def tokens(self) -> int:
        """Tokens of the extras, counted again when the counter's counts changed since the last count."""
        if self._revision != self._counter.revision:
            self._tokens = self._count()
            self._revision = self._counter.revision
        return self._tokens

    def set(self, *, tools: Sequence[Mapping[str, Any]] = (), instructions: str | None = None,
            response_format: Mapping[str, Any] | None = None) -> bool:
        """State the extras (each call states them all: what is not passed is not sent); True when a new set.

        Raises ConfigError naming the field on a value that is not what the API takes.
        """
        from ..errors import ConfigError

        if instructions is not None and not isinstance(instructions, str):
            raise ConfigError(f"must be a string, got {type(instructions).__name__}", field="instructions")
        if response_format is not None and not isinstance(response_format, Mapping):
            raise ConfigError(f"must be a JSON schema mapping, got {type(response_format).__name__}",
                              field="response_format")
        listed = list(tools)
        for i, tool in enumerate(listed):
            if not isinstance(tool, Mapping):
                raise ConfigError(f"must be a tool schema mapping, got {type(tool).__name__}", field=f"tools[{i}]")
        key = json.dumps([listed, instructions, response_format], sort_keys=True, default=repr)
        if key == self._key:
            return False
        self._key = key
        self.tools, self.instructions, self.response_format = listed, instructions or None, response_format
        self._tokens = self._count()
        self._revision = self._counter.revision
        return True

    def counted_later(self) -> Callable[[MessageCounter], int]:
        """The extras as they stand, counted by the counter it is given when called (a figure made later)."""
        return partial(_count_extras, tools=tuple(self.tools), instructions=self.instructions,
                       response_format=self.response_format)

    def _count(self) -> int:
        return _count_extras(self._counter, tools=self.tools, instructions=self.instructions,
                             response_format=self.response_format)


def _count_extras(counter: MessageCounter, *, tools: Sequence[Mapping[str, Any]], instructions: str | None,
                  response_format: Mapping[str, Any] | None) -> int:
    total = counter.count_tools(tools) if tools else 0
    if instructions:
        from ..messages import Message

        total += counter.count_message(Message("system", instructions))
    if response_format:
        total += counter.counter.count(json.dumps(response_format, ensure_ascii=False, separators=(",", ":"),
                                                  sort_keys=True, default=str))
    return total
