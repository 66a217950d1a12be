"""The short notes the model reads about its own context: the budget line and the compaction receipt.

Both name a tool only when the agent has it (``tools``): a note that sends the model to a missing tool costs a
failed call. Both are ``user`` messages: every provider accepts user text after a tool result and after the
summary, and neither is an instruction the model could mistake for its own words.

- The **budget line** (:func:`status_text`) is sent after everything else in a request, outside the history: it
  changes on every call, so anywhere earlier it would break the provider's cached prompt prefix from that point.
  It says how full the window is and what was masked or summarized since the model's last turn, and how to get it
  back.
- The **compaction receipt** (:func:`receipt_text`) sits in the history right after the summary a compaction wrote
  (that part of the prompt was rewritten anyway) and stays until the next compaction replaces it.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..messages import Message

__all__ = [
    "HISTORY_SEARCH",
    "READ_OUTPUT",
    "RECEIPT_KIND",
    "STATUS_KIND",
    "SinceLastTurn",
    "insert_receipt",
    "receipt_message",
    "receipt_text",
    "status_message",
    "status_text",
    "without_receipts",
]

# meta["kind"] of the two notes (the archive, restore and compaction recognise and skip them).
STATUS_KIND = "context_status"
RECEIPT_KIND = "receipt"
# The tools the notes may point to (names as the retrieval tools declare them; no import of the cache needed).
READ_OUTPUT = "tool_output_cache"
HISTORY_SEARCH = "history_search"


@dataclass(slots=True)
class SinceLastTurn:
    """What happened to the view since the model's last turn (reset when its next message arrives)."""

    masked: int = 0
    masked_tokens: int = 0
    summarized: int = 0
    compactions: int = 0

    @property
    def changed(self) -> bool:
        """Whether anything was masked or summarized."""
        return bool(self.masked or self.summarized)


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def status_text(*, tokens: int, window: int, since: SinceLastTurn, tools: Collection[str]) -> str:
    """The budget line: ``[context: 9,870 of 16,000 tokens used (62%); since your last turn …]``."""
    pct = round(100 * tokens / window) if window else 0
    head = f"[context: {tokens:,} of {window:,} tokens used ({pct}%)"
    parts: list[str] = []
    if since.masked:
        how = f", {READ_OUTPUT} reads them back by ref" if READ_OUTPUT in tools else ", each keeps its ref"
        parts.append(f"{_plural(since.masked, 'older tool output')} replaced by a ref{how}")
    if since.summarized:
        how = f", {HISTORY_SEARCH} finds their details" if HISTORY_SEARCH in tools else ""
        parts.append(f"{_plural(since.summarized, 'earlier message')} summarized{how}")
    if not parts:
        return head + "]"
    return f"{head}; since your last turn: {'; '.join(parts)}]"


def status_message(text: str) -> Message:
    """The budget line as the message sent last (``meta["kind"] = "context_status"``)."""
    return Message("user", text, meta={"kind": STATUS_KIND})


def receipt_text(*, summarized: int, turns: int, tools: Collection[str]) -> str:
    """The compaction receipt: how many earlier messages the summary above replaced, and where they are."""
    what = _plural(summarized, "earlier message")
    if turns:
        what += f" ({turns:,} of your turn{'' if turns == 1 else 's'})"
    if HISTORY_SEARCH in tools:
        back = f"their full text is archived: call {HISTORY_SEARCH} with a regular expression to find exact details"
    else:
        back = "their full text is archived outside this conversation"
    if READ_OUTPUT in tools:
        back += f"; cut tool outputs stay readable by ref with {READ_OUTPUT}"
    return f"[context note: {what} were summarized above to keep this conversation inside its window; {back}.]"


def receipt_message(text: str) -> Message:
    """The receipt as a ``user`` message (``meta["kind"] = "receipt"``)."""
    return Message("user", text, meta={"kind": RECEIPT_KIND})


def without_receipts(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without compaction receipts (a compaction replaces the old receipt with its own)."""
    # (Only the messages whose meta holds a kind are looked at, found by C loops: a compaction of a 100,000-message
    # view has at most one receipt among them, issue 22.)
    kinded = map(operator.contains, map(_META_OF, messages), itertools.repeat("kind"))
    if not any(m.kind == RECEIPT_KIND for m in itertools.compress(messages, kinded)):
        return list(messages)
    return [m for m in messages if m.kind != RECEIPT_KIND]


_META_OF = operator.attrgetter("meta")


def insert_receipt(messages: Sequence[Message], receipt: Message) -> list[Message]:
    """``messages`` with ``receipt`` right after the latest summary (earlier receipts removed).

    Unchanged without a summary. A ``system`` summary sits among the pinned system messages: the receipt follows
    them all.
    """
    out = without_receipts(messages)
    at = next((i for i in range(len(out) - 1, -1, -1) if out[i].kind == "summary"), None)
    if at is None:
        return out
    if out[at].role == "system":
        while at + 1 < len(out) and out[at + 1].role in ("system", "developer"):
            at += 1
    return [*out[: at + 1], receipt, *out[at + 1 :]]
