"""Parsing a summarizer's reply into the summary and the facts to retain verbatim."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ParsedReply", "parse_reply", "retain_lines"]

_SUMMARY = re.compile(r"<summary>(.*?)(?:</summary>|\Z)", re.DOTALL | re.IGNORECASE)
_RETAIN = re.compile(r"<retain>(.*?)(?:</retain>|\Z)", re.DOTALL | re.IGNORECASE)
# Bullets and numbering a model puts in front of one fact per line.
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)])\s+")


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """The summary text and the retained facts (one fact each, bullets stripped)."""

    summary: str
    retain: tuple[str, ...]
    tagged: bool


def retain_lines(block: str) -> tuple[str, ...]:
    """One fact per non-empty line of ``block``, bullets and numbering stripped, duplicates dropped."""
    facts: list[str] = []
    for line in block.splitlines():
        fact = _BULLET.sub("", line).strip()
        if fact and fact not in facts:
            facts.append(fact)
    return tuple(facts)


def parse_reply(reply: str) -> ParsedReply:
    """Split a reply into ``<summary>`` and ``<retain>`` sections.

    An unclosed tag runs to the end of the reply (a reply cut at ``max_tokens`` keeps what it said). Without a
    ``<summary>`` tag the whole reply, less any ``<retain>`` block, is the summary.
    """
    retain_match = _RETAIN.search(reply)
    retain = retain_lines(retain_match.group(1)) if retain_match else ()
    summary_match = _SUMMARY.search(reply)
    if summary_match:
        body = summary_match.group(1)
        # A retain block opened inside an unclosed summary belongs to retain, not to the summary.
        inner_retain = _RETAIN.search(body)
        if inner_retain:
            body = body[: inner_retain.start()]
        return ParsedReply(body.strip(), retain, True)
    rest = reply[: retain_match.start()] + reply[retain_match.end() :] if retain_match else reply
    return ParsedReply(rest.strip(), retain, retain_match is not None)
