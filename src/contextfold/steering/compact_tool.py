"""``compact_context``: a tool the agent calls to compact its own context, as a user types ``/compact``.

It runs the same compaction as :func:`contextfold.integrations.slash.handle_command` (``ContextManager.compact``
with the optional instructions: what the summary must keep) and answers with what was kept and where the rest is.
The arguments are the model's: decoded under the limits of :mod:`contextfold.untrusted`, and every failure is a
result the model can read, never an exception in the agent loop.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

from ..errors import ContextfoldError
from ..formats.tool_schemas import tool_schema
from ..messages import ToolCall
from ..untrusted import answer_safely, decode_arguments
from .notes import HISTORY_SEARCH, READ_OUTPUT

__all__ = [
    "COMPACT_CONTEXT_TOOL",
    "MAX_INSTRUCTION_CHARS",
    "MIN_MESSAGES_BETWEEN",
    "CompactsContext",
    "compact_context_schema",
    "compact_context_spec",
    "compact_result_text",
    "run_compact_context",
]

COMPACT_CONTEXT_TOOL = "compact_context"
# What to keep is a sentence or a short list: longer text would be a prompt of its own inside the summary request.
MAX_INSTRUCTION_CHARS = 2_000
# A compaction asked for right after another (fewer new messages than this) would summarize almost nothing and break
# the provider's prompt cache again: the tool declines and says why.
MIN_MESSAGES_BETWEEN = 4
# The result repeats this much of the instructions (enough to recognise them, not to pay for them twice).
ECHO_CHARS = 200

_DESCRIPTION = (
    "Compact your context now: earlier turns are replaced by a summary, so there is room for the work ahead. "
    "Optional instructions say what the summary must keep (file names, decisions, open questions). Use it at a "
    "natural break (a subtask done), not in the middle of reading something. The full history stays archived."
)
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "instructions": {
            "type": "string",
            "maxLength": MAX_INSTRUCTION_CHARS,
            "description": "What the summary must keep, in a sentence or a short list. Optional.",
        },
    },
    "additionalProperties": False,
}
# The kept layers of a compaction (CompactionStats.kept), in the words the result uses.
_KEPT_WORDS = (("pinned", "system or pinned message"), ("protected", "protected tool message"),
               ("user", "user message"), ("recent", "recent message"), ("retained_facts", "retained fact"))


class CompactsContext(Protocol):
    """What the tool needs of a :class:`~contextfold.manager.ContextManager`."""

    def compact(self, *, force: bool = True, instructions: str | None = None, kind: str = "hard") -> Any:
        """Compact now; a report with ``compacted``, token and message figures and ``kept``."""


def compact_context_spec() -> tuple[str, str, dict[str, Any]]:
    """(name, description, JSON schema of the arguments) of the tool."""
    return COMPACT_CONTEXT_TOOL, _DESCRIPTION, _PARAMETERS


def compact_context_schema(format: str = "openai_chat") -> dict[str, Any]:
    """The tool's declaration in ``format``: ``openai_chat``, ``openai_responses`` or ``anthropic``."""
    return tool_schema(format, COMPACT_CONTEXT_TOOL, _DESCRIPTION, _PARAMETERS)


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _clip(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= ECHO_CHARS else one_line[: ECHO_CHARS - 1] + "…"


def compact_result_text(report: Any, *, tools: Collection[str], instructions: str | None = None) -> str:
    """What the model reads after a compaction it asked for: what was summarized, what was kept, where the rest is."""
    if not report.compacted:
        return (f"{COMPACT_CONTEXT_TOOL}: nothing to compact: {report.tokens_after:,} tokens in "
                f"{report.messages_after} messages are all kept verbatim (recent turns, pinned messages).")
    kept: Mapping[str, int] = getattr(report, "kept", None) or {}
    layers = [_plural(int(kept[k]), words) for k, words in _KEPT_WORDS if kept.get(k)]
    lines = [
        f"{COMPACT_CONTEXT_TOOL}: {_plural(report.compacted, 'earlier message')} summarized; context "
        f"{report.tokens_before:,} -> {report.tokens_after:,} tokens ({report.messages_before} -> "
        f"{report.messages_after} messages).",
        "Kept verbatim: " + (", ".join(layers) if layers else "the recent turns") + "; the summary is in your "
        "context above." + (f" The summarizer was asked to keep: {_clip(instructions)}" if instructions else ""),
    ]
    where = "The full earlier history is archived"
    if HISTORY_SEARCH in tools:
        where += f": {HISTORY_SEARCH} finds exact lines in it (a regular expression)"
    if READ_OUTPUT in tools:
        where += f"; cut tool outputs are readable by ref with {READ_OUTPUT}"
    lines.append(where + ".")
    return "\n".join(lines)


def _instructions(call: ToolCall) -> str | None:
    """The instructions argument, or raises ValueError with the text the model reads."""
    args = decode_arguments(call)
    if isinstance(args, str):
        raise ValueError(args)
    unknown = sorted(set(args) - {"instructions"})
    if unknown:
        raise ValueError(f"error: {COMPACT_CONTEXT_TOOL} does not take {', '.join(unknown)}; it takes instructions")
    value = args.get("instructions")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"error: instructions must be a string, got {type(value).__name__}")
    text = value.strip()
    if len(text) > MAX_INSTRUCTION_CHARS:
        raise ValueError(f"error: instructions are {len(text):,} characters; keep them under "
                         f"{MAX_INSTRUCTION_CHARS:,} (a sentence or a short list of what to keep)")
    return text or None


def run_compact_context(manager: CompactsContext, call: ToolCall, *, tools: Collection[str],
                        messages_since_compaction: int | None = None) -> str:
    """Answer a ``compact_context`` call: compact ``manager`` and say what was kept, or why not.

    ``messages_since_compaction``: messages added since the last compaction (None: no compaction yet); fewer than
    :data:`MIN_MESSAGES_BETWEEN` declines.
    """

    def answer(call: ToolCall) -> str:
        if call.name != COMPACT_CONTEXT_TOOL:
            return f"error: unknown tool {call.name!r}; this executor answers {COMPACT_CONTEXT_TOOL}"
        try:
            instructions = _instructions(call)
        except ValueError as exc:
            return str(exc)
        if messages_since_compaction is not None and messages_since_compaction < MIN_MESSAGES_BETWEEN:
            return (f"{COMPACT_CONTEXT_TOOL}: declined: the context was compacted {messages_since_compaction} "
                    "messages ago; there is nothing new to summarize yet.")
        try:
            report = manager.compact(force=True, instructions=instructions)
        except ContextfoldError as exc:
            return f"{COMPACT_CONTEXT_TOOL}: compaction failed ({type(exc).__name__}: {exc}); the context is unchanged."
        return compact_result_text(report, tools=tools, instructions=instructions)

    return answer_safely(call, answer)
