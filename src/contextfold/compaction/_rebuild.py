"""The messages compaction writes: the rolling summary, the retain block, and the assembled view.

Both are ``user`` messages. Every provider accepts user content anywhere after the system prompt, whereas a
``system`` message mid-conversation is rejected or moved by some (Anthropic, Gemini) and an ``assistant`` message
would put words in the model's mouth that it may contradict or continue. As user content, a summary reads as
context handed to the model, which is what it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from ..messages import Message, Role
from ..tokens import MessageCounter

__all__ = [
    "RETAIN_HEADER",
    "SUMMARY_PREFIX",
    "SummaryBuilder",
    "assemble",
    "fit_summary",
    "previous_facts",
    "previous_summary",
    "retain_message",
    "summary_header",
    "summary_message",
]

# The first line of every summary. Recognisable by people reading a transcript and by code (see _HEADER_RE).
SUMMARY_PREFIX = "[contextfold summary"
RETAIN_HEADER = "[contextfold retained facts — kept verbatim from the compacted history]"
TRUNCATED_NOTE = "\n…[summary cut to fit the context budget; the full history is in the archive]"
_HEADER_RE = re.compile(r"^\[contextfold summary v(\d+)[^\]]*\]\n?")


def summary_header(version: int, compacted_count: int, template: str | None = None) -> str:
    """The first line of summary ``version`` covering ``compacted_count`` messages.

    ``template`` (``Policy.summary_header``) replaces the default, with ``{version}`` and ``{count}`` filled in.
    """
    if template is not None:
        return template.format(version=version, count=compacted_count)
    noun = "message" if compacted_count == 1 else "messages"
    return f"{SUMMARY_PREFIX} v{version} — {compacted_count} earlier {noun} compacted]"


def summary_message(
    text: str,
    *,
    version: int,
    compacted_count: int,
    original_token_count: int,
    summary_token_count: int,
    compacted_at: datetime,
    role: Role = "user",
    header: str | None = None,
) -> Message:
    """The summary as a ``role`` message (user by default) with its metadata in ``meta`` (never sent to a provider).

    ``meta["header"]`` keeps the first line, so a later compaction strips a custom header before folding.
    """
    first_line = summary_header(version, compacted_count, header)
    return Message(
        role,
        f"{first_line}\n{text}".rstrip("\n"),
        meta={
            "kind": "summary",
            **({"header": first_line} if header is not None else {}),
            "summary_version": version,
            "compacted_count": compacted_count,
            "original_token_count": original_token_count,
            "summary_token_count": summary_token_count,
            "compacted_at": compacted_at.isoformat(),
        },
    )


def retain_message(facts: Sequence[str]) -> Message | None:
    """The block of facts to keep verbatim, or None when there are none."""
    if not facts:
        return None
    body = "\n".join(f"- {fact}" for fact in facts)
    return Message("user", f"{RETAIN_HEADER}\n{body}", meta={"kind": "retain", "retain_facts": tuple(facts)})


def previous_summary(messages: Sequence[Message]) -> tuple[str | None, int, int, int]:
    """Fold earlier summaries: (their text without headers, latest version, messages and tokens they cover)."""
    texts: list[str] = []
    version = covered = original = 0
    for m in messages:
        match = _HEADER_RE.match(m.text)
        custom = m.meta.get("header")
        if match is None and isinstance(custom, str) and m.text.startswith(custom):
            texts.append(m.text[len(custom):].lstrip("\n"))
        else:
            texts.append(m.text[match.end():] if match else m.text)
        meta_version = m.meta.get("summary_version")
        if isinstance(meta_version, int):
            version = max(version, meta_version)
        elif match:
            version = max(version, int(match.group(1)))
        covered += _int(m.meta.get("compacted_count"))
        original += _int(m.meta.get("original_token_count"))
    text = "\n\n".join(t for t in texts if t.strip())
    return (text or None), version, covered, original


def previous_facts(messages: Sequence[Message]) -> list[str]:
    """Facts of earlier retain blocks, from ``meta`` when we wrote it, else from the bullet lines."""
    facts: list[str] = []
    for m in messages:
        stored = m.meta.get("retain_facts")
        if isinstance(stored, tuple | list):
            facts.extend(str(f) for f in stored)
        else:
            facts.extend(line[2:] for line in m.text.splitlines() if line.startswith("- "))
    return facts


def fit_summary(text: str, facts: list[str], reserve: int, counter: MessageCounter,
                build: SummaryBuilder) -> tuple[Message, Message | None, bool]:
    """The summary and retain messages within ``reserve`` tokens together.

    The oldest facts go first, then the summary's tail. Returns the two messages and whether anything was cut.
    """
    cut = False
    facts = list(facts)
    summary = build(text)
    retain = retain_message(facts)
    while retain is not None and counter.count_message(summary) + counter.count_message(retain) > reserve:
        facts.pop(0)
        retain = retain_message(facts)
        cut = True
    if counter.count_message(summary) + (counter.count_message(retain) if retain else 0) <= reserve:
        return summary, retain, cut
    # Longest head of the summary that fits (binary search over characters; counts are monotone enough).
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count_message(build(text[:mid] + TRUNCATED_NOTE)) <= reserve:
            lo = mid
        else:
            hi = mid - 1
    candidate = build(text[:lo] + TRUNCATED_NOTE)
    if counter.count_message(candidate) > reserve:
        candidate = build("")
    return candidate, None, True


class SummaryBuilder:
    """Builds the summary message for a text with the metadata fixed (so fitting can try many lengths)."""

    def __init__(self, *, version: int, compacted_count: int, original_token_count: int, compacted_at: datetime,
                 counter: MessageCounter, role: Role = "user", header: str | None = None) -> None:
        self.role: Role = role
        self.header = header
        self.version = version
        self.compacted_count = compacted_count
        self.original_token_count = original_token_count
        self.compacted_at = compacted_at
        self.counter = counter

    def __call__(self, text: str) -> Message:
        """The summary message for ``text``."""
        return summary_message(
            text,
            version=self.version,
            compacted_count=self.compacted_count,
            original_token_count=self.original_token_count,
            summary_token_count=self.counter.counter.count(text),
            compacted_at=self.compacted_at,
            role=self.role,
            header=self.header,
        )



def assemble(messages: Sequence[Message], *, front: Sequence[int], retain: Message | None,
             user_block: Sequence[int], summary: Message, kept: Sequence[int]) -> list[Message]:
    """The compacted view: pinned front · retain block · user block · summary · kept messages in original order.

    A ``system`` summary (``Policy(summary_role="system")``, 002 §Design 3) goes right after the pinned front, so
    that the system messages stay one block at the start, which every provider accepts.
    """
    out = [messages[i] for i in front]
    if summary.role == "system":
        out.append(summary)
    if retain is not None:
        out.append(retain)
    out.extend(messages[i] for i in user_block)
    if summary.role != "system":
        out.append(summary)
    out.extend(messages[i] for i in kept)
    return out


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
