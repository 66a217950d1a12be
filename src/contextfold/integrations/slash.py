"""Slash commands for interactive agents: ``/compact [instructions]`` and ``/context`` (alias ``/compact_status``).

Hand every line the user types to :func:`handle_command` before it reaches the model; it answers a one-line report
for a command it knows and None for anything else::

    reply = handle_command(cm, line)
    if reply is not None:
        print(reply)          # handled: do not send the line to the model
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ContextfoldError

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["COMMANDS", "handle_command"]

# Command -> what it does, for an agent's /help.
COMMANDS: dict[str, str] = {
    "/compact": "summarize the conversation now; optional instructions say what the summary must keep",
    "/context": "show how full the context window is and what it holds",
    "/compact_status": "the same as /context (004 §Risk 4's name for it)",
}


def handle_command(cm: ContextManager, text: str) -> str | None:
    """Run ``/compact [instructions]`` or ``/context``; return a one-line report, or None for any other text.

    A compaction that fails (nothing fits, the summarizer failed) is reported in the line, not raised: an
    interactive session should keep going.

    >>> handle_command(cm, "/compact keep the failing test names")  # doctest: +SKIP
    'compacted 42 messages: 61,204 → 9,870 tokens (-84%), 88 → 14 messages in 12 ms'
    """
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    command, *rest = stripped.split(None, 1)
    command = command.lower()
    if command in ("/context", "/compact_status"):
        return cm.status().line()
    if command == "/compact":
        instructions = rest[0].strip() if rest else None
        try:
            report = cm.compact(force=True, instructions=instructions)
        except ContextfoldError as exc:
            return f"compaction failed: {type(exc).__name__}: {exc}"
        if report.compacted == 0:
            return f"nothing to compact: {report.tokens_after:,} tokens in {report.messages_after} messages"
        return report.line()
    return None
