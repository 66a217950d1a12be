"""Declaring a tool the agent may call, in the shape each provider's API takes.

The tools contextfold gives the agent (the tool-output cache reads, ``history_search``) are defined once as a
name, a description and a JSON-schema of the arguments; :func:`tool_schema` wraps them for the provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SCHEMA_FORMATS", "tool_schema"]

# The wire formats whose tool declarations are built here (Gemini declares tools per request, not per tool).
SCHEMA_FORMATS = ("openai_chat", "openai_responses", "anthropic")


def tool_schema(format: str, name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The declaration of tool ``name`` for ``format``: ``openai_chat``, ``openai_responses`` or ``anthropic``.

    ``parameters`` is copied, so a caller may change the declaration it gets (add ``strict``, ``cache_control``)
    without changing the definition it came from.

    Raises:
        ValueError: for another format name.

    >>> tool_schema("anthropic", "echo", "Repeat the text.", {"type": "object"})
    {'name': 'echo', 'description': 'Repeat the text.', 'input_schema': {'type': 'object'}}
    """
    params = _copy(parameters)
    if format == "openai_chat":
        return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}
    if format == "openai_responses":
        return {"type": "function", "name": name, "description": description, "parameters": params}
    if format == "anthropic":
        return {"name": name, "description": description, "input_schema": params}
    raise ValueError(f"format must be one of {', '.join(SCHEMA_FORMATS)}, got {format!r}")


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value
