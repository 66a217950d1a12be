"""Test doubles shipped with contextfold, for testing agents and integrations without a model or a network.

- :class:`ScriptedSummarizer`: a summarizer answering from a script.
- :class:`ScriptedLLMServer`: an OpenAI/Anthropic-compatible HTTP server on 127.0.0.1 answering from a script,
  with :class:`Reply`, :class:`ErrorReply` and :class:`ScriptedToolCall` to write the script.

Names resolve lazily so that importing the package starts no server and imports no ``http.server``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = ["ErrorReply", "RecordedRequest", "Reply", "ScriptedLLMServer", "ScriptedSummarizer", "ScriptedToolCall",
           "formats_validator"]

_EXPORTS: dict[str, str] = {
    "ErrorReply": "wire",
    "RecordedRequest": "server",
    "Reply": "wire",
    "ScriptedLLMServer": "server",
    "ScriptedSummarizer": "summarizer",
    "ScriptedToolCall": "wire",
    "formats_validator": "server",
}

if TYPE_CHECKING:
    from .server import RecordedRequest, ScriptedLLMServer, formats_validator
    from .summarizer import ScriptedSummarizer
    from .wire import ErrorReply, Reply, ScriptedToolCall


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
