"""Decoding the arguments the model wrote for one of our tools, and turning any failure into a tool result.

The arguments are untrusted: they may be huge, nested ``[`` × 100,000 deep (``json`` then raises RecursionError),
or not an object at all. Every problem must come back to the model as a tool result that says what to fix: an
exception would break the agent loop (documented contract of ``execute_tool_call``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..messages import ToolCall

__all__ = ["MAX_ARGUMENT_CHARS", "answer_safely", "decode_arguments"]

# Our tools take a pattern, a ref id and a few numbers: 64K characters is far more than any honest call needs, and
# bounds the time and memory spent decoding a hostile one.
MAX_ARGUMENT_CHARS = 64 * 1024


def decode_arguments(call: ToolCall) -> dict[str, Any] | str:
    """The call's arguments as a dict, or an ``error: …`` text for the model."""
    size = len(call.arguments)
    if size > MAX_ARGUMENT_CHARS:
        return f"error: the arguments of {call.name} are {size:,} characters; keep them under {MAX_ARGUMENT_CHARS:,}"
    try:
        args = call.parsed_arguments()
    except RecursionError:
        return f"error: the arguments of {call.name} are nested too deeply; send a flat JSON object"
    except ValueError as exc:
        return f"error: the arguments of {call.name} are not valid JSON ({exc})"
    if not isinstance(args, dict):
        return f"error: the arguments of {call.name} must be a JSON object, got {type(args).__name__}"
    return args


def answer_safely(call: ToolCall, answer: Callable[[ToolCall], str]) -> str:
    """``answer(call)``, or an error text when it raises anything at all (a bug must not stop the agent either)."""
    try:
        return answer(call)
    except RecursionError:
        return f"error: {call.name} failed: the input is nested too deeply"
    except Exception as exc:  # the last line of defence: any failure becomes a result the model can read
        return f"error: {call.name} failed ({type(exc).__name__}: {exc}); try again with simpler arguments"
