"""The answered message: what the model's next reply responds to, which no view may hide.

That is the latest user message, or, when the history ends in tool results, the latest assistant message with
tool calls together with ALL its results. Masking, compaction and truncation must leave it in the view with real
content: a model that cannot see the result it is answering repeats the call (a write, possibly) or guesses.

Pure functions over message lists, shared by the policy code that keeps the guarantee and by the replay metric
that checks it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .messages import Message
from .pairing import ToolPair, pair_list

__all__ = ["answered_in_view", "answered_indices", "has_real_content", "without_notes"]

# Lines contextfold writes about an output rather than from it: omission markers, the cache note, placeholders.
_NOTE_LINE = re.compile(
    r"^\s*(?:\[\.\.\. lines \d+-\d+ of \d+ omitted.*\]|\[\.\.\. end of the outline.*\]|"
    r"\[tool output (?:cached as|trimmed;|cut to fit the context:).*\]|"
    r"Total output lines: \d+)\s*$",
    re.MULTILINE,
)
_INLINE_MARK = re.compile(r"…\d+ (?:tokens|chars|bytes) truncated…")
# A kept part shorter than this (non-space characters) is a stub, unless the original itself is that short.
MIN_REAL_CONTENT_CHARS = 40


# A masked placeholder that carries a digest: the digest is the output's content, the rest a note about it.
_PLACEHOLDER_DIGEST = re.compile(
    r"^\[tool output trimmed; ref=tout_[0-9a-f]{16}; (?:it|its first and last lines) mentioned: (.*)\]$", re.MULTILINE)


def without_notes(text: str) -> str:
    """``text`` without contextfold's notes about it (omission markers, cache notes, placeholders' refs).

    A masked placeholder's digest stays: it lists names of the output itself. What remains is what a summary may
    quote from the output; the notes only name refs and the retrieval tools.
    """
    # Each pattern runs only on a text holding its literal: most outputs have no note, and a pattern anchored at line
    # starts is tried at every position of the text (a third of a tool output's reading at add, issue 22).
    if "[tool output trimmed; ref=tout_" in text:
        text = _PLACEHOLDER_DIGEST.sub(r"\1", text)
    if "[... " in text or "[tool output " in text or "Total output lines: " in text:
        text = _NOTE_LINE.sub("", text)
    if " truncated…" in text:
        text = _INLINE_MARK.sub("", text)
    return text


def answered_indices(messages: Sequence[Message], pairs: Sequence[ToolPair] | None = None) -> tuple[int, ...]:
    """Indices of the answered message(s) in ``messages`` (empty when there is none).

    When the history ends in tool results, that is the assistant message holding the latest tool calls and every
    result of those calls; otherwise the latest user message (SWE-agent's ``OBSERVATION:`` messages included).
    ``pairs``: ``pair_list(messages)``, when the caller has it.
    """
    last = len(messages) - 1
    while last >= 0 and messages[last].role in ("system", "developer"):
        last -= 1
    if last < 0:
        return ()
    if messages[last].role == "tool":
        pairs = pair_list(messages) if pairs is None else pairs
        answered = next((p for p in reversed(pairs) if p.result_index == last), None)
        if answered is not None:
            call_index = answered.call_index
            results = [p.result_index for p in pairs if p.call_index == call_index and p.result_index is not None]
            return tuple(sorted({call_index, *results}))
    for i in range(last, -1, -1):
        if messages[i].role == "user":
            return (i,)
    return ()


def has_real_content(original: str, shown: str) -> bool:
    """Whether ``shown`` (a message's text in a view) carries content of ``original`` rather than a stub.

    Equal texts do; otherwise what remains after removing contextfold's notes and omission markers must hold at
    least :data:`MIN_REAL_CONTENT_CHARS` non-space characters (or all of a shorter original's).
    """
    if shown == original:
        return True
    body = _INLINE_MARK.sub("", _NOTE_LINE.sub("", shown))
    kept = sum(1 for c in body if not c.isspace())
    wanted = min(MIN_REAL_CONTENT_CHARS, sum(1 for c in original if not c.isspace()))
    return kept >= max(wanted, 1)


def answered_in_view(history: Sequence[Message], view: Sequence[Message]) -> bool:
    """Whether every answered message of ``history`` is in ``view`` with real content.

    A tool result is matched by its call id and must not be masked; the calling assistant message must be there
    with the same calls (names and ids) and arguments not cleared; a user message must be there verbatim or, if
    truncated, with real content.
    """
    wanted = answered_indices(history)
    if not wanted:
        return True
    for index in wanted:
        original = history[index]
        if original.role == "tool":
            ok = any(
                m.role == "tool" and m.tool_call_id == original.tool_call_id and m.kind != "masked"
                and has_real_content(original.text, m.text)
                for m in view
            )
        elif original.role == "assistant":
            ok = any(_same_calls(original, m) for m in view)
        else:
            ok = any(m.role == original.role and (m.text == original.text or (
                m.kind == "truncated" and has_real_content(original.text, m.text))) for m in view)
        if not ok:
            return False
    return True


def _same_calls(original: Message, shown: Message) -> bool:
    """``shown`` is ``original``'s assistant message with the same calls and no argument cleared to a ref."""
    if shown.role != "assistant":
        return False
    if not original.tool_calls:
        return shown.text == original.text
    if [(c.id, c.name) for c in shown.tool_calls] != [(c.id, c.name) for c in original.tool_calls]:
        return False
    return all(s.arguments == o.arguments or '"trimmed"' not in s.arguments
               for s, o in zip(shown.tool_calls, original.tool_calls, strict=True))
