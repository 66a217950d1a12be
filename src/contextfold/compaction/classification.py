"""What a message is for: INSTRUCTION, REASONING, FACT or MIXED, by deterministic heuristics.

Compaction reduces FACTs first (tool outputs and pasted data can be re-fetched or looked up by ref), then MIXED,
and keeps REASONING and INSTRUCTION longest (what the user asked and what the agent decided cannot be recovered
from anywhere else). The rules are cheap string tests, so classifying a long history costs little and always gives
the same answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

from .._memo import TextMemo, text_key
from ..messages import Message, ThinkingPart

__all__ = ["Category", "classify", "classify_all", "reduction_rank"]


class Category(StrEnum):
    """The role a message plays in the task."""

    INSTRUCTION = "instruction"
    REASONING = "reasoning"
    FACT = "fact"
    MIXED = "mixed"


# Reduced first → kept longest.
_RANK = {Category.FACT: 0, Category.MIXED: 1, Category.REASONING: 2, Category.INSTRUCTION: 3}

# Kinds contextfold writes itself. Placeholders stand for tool output (a fact); a summary mixes everything.
_FACT_KINDS = frozenset({"placeholder", "masked", "truncated", "aborted_output", "retain"})
_MIXED_KINDS = frozenset({"summary"})

# SWE-agent style text observations arrive as user messages; they are tool output, not requests.
_OBSERVATION_PREFIXES = ("OBSERVATION:", "Observation:", "<observation>", "Tool output:", "Output:")

# A request or constraint: an imperative at the start of a sentence, or a modal that binds the agent.
_IMPERATIVE = re.compile(
    r"(?:^|[.!?\n]\s*)(?:please\s+)?(?:add|avoid|book|cancel|change|check|create|delete|do|don't|ensure|find|fix|"
    r"implement|keep|list|make|never|only|remove|rename|replace|run|show|stop|tell|update|use|write|help|can you|"
    r"could you|i want|i need|i'd like|i would like)\b",
    re.IGNORECASE,
)
_CONSTRAINT = re.compile(
    r"\b(?:must|must not|mustn't|should|shouldn't|do not|don't|never|always|only|at most|at least|no more than|"
    r"make sure|required?|forbidden|not allowed|instead of)\b",
    re.IGNORECASE,
)
# The agent thinking aloud or planning.
_PLAN = re.compile(
    r"\b(?:i will|i'll|let me|let's|i think|i need to|we need to|next,? i|first,? i|my plan|the plan|plan:|"
    r"step \d|todo|hypothesis|it seems|it looks like|the (?:issue|problem|bug|cause) is|because|therefore|so i)\b",
    re.IGNORECASE,
)
# Data: code fences, tracebacks, JSON, log lines, tables.
_DATA = re.compile(
    r"```|Traceback \(most recent call last\)|^\s*[\[{]\s*\"|^\s*\d+[:|]\s|^\s*(?:File \"|at [\w.$]+\(|\|.*\|)",
    re.MULTILINE,
)

# SWE-agent style tool calls written into the text (the model has no native tool calling).
_TEXT_CALL = re.compile(r"<function=[\w.-]+>")

# Text past this many characters with data markers is mostly payload, whatever sentence introduces it.
_DATA_HEAVY_CHARS = 2_000
# Share of lines that must look like data for the message to count as data.
_DATA_LINE_SHARE = 0.3


def classify(message: Message) -> Category:
    """The category of ``message``.

    System and developer messages are instructions; tool results and contextfold placeholders are facts;
    assistant thinking and plans are reasoning; a user message is an instruction unless it is mostly pasted data
    (then a fact, or mixed when it also asks for something); an assistant message with tool calls is mixed (it
    reasons and acts); one that is mostly data is a fact, or mixed when it also reasons about it.
    """
    kind = message.kind
    if kind in _MIXED_KINDS:
        return Category.MIXED
    if kind in _FACT_KINDS or message.role == "tool":
        return Category.FACT
    if message.role in ("system", "developer"):
        return Category.INSTRUCTION
    text = message.text
    if message.role == "user":
        return _classify_user(text)
    return _classify_assistant(message, text)


def classify_all(messages: Iterable[Message]) -> list[Category]:
    """The category of each message, in order.

    A copy of a message given only its own id (``Message._origin``) has the same role, content, calls and meta
    values: the same category, classified once per origin (issue 22: a repeated history holds ~30 copies of each).
    """
    items = list(messages)  # (held for the call: the copies keep their origins alive, so an id names one origin)
    out: list[Category] = []
    put = out.append
    by_origin: dict[int, Category] = {}
    for m in items:
        origin = m._origin
        if origin is None:
            put(classify(m))
            continue
        found = by_origin.get(id(origin))
        if found is None:
            found = by_origin[id(origin)] = classify(m)
        put(found)
    return out


def reduction_rank(category: Category) -> int:
    """Lower ranks are reduced first: FACT 0, MIXED 1, REASONING 2, INSTRUCTION 3."""
    return _RANK[category]


# A user text's category, and whether an assistant text is data, by the text (issue 22: a history that repeats
# its messages reads each text once). Entries are a few hundred bytes; 4 MB holds ~16,000 texts.
_BY_TEXT: TextMemo[tuple[Category, bool]] = TextMemo(max_bytes=4_000_000)
_NOT_READ = Category.MIXED  # (a placeholder: a user text's category is never read from an assistant's entry)


def _classify_user(text: str) -> Category:
    if len(text) <= _DATA_HEAVY_CHARS // 4:
        return _read_user(text)  # (short: read again rather than remembered)
    key = ("user", *text_key(text))
    found = _BY_TEXT.get(key)
    if found is None:
        found = (_read_user(text), False)
        _BY_TEXT.put(key, found, 0)
    return found[0]


def _is_data_remembered(text: str) -> bool:
    if len(text) <= _DATA_HEAVY_CHARS // 4:
        return _is_data(text)
    key = ("data", *text_key(text))
    found = _BY_TEXT.get(key)
    if found is None:
        found = (_NOT_READ, _is_data(text))
        _BY_TEXT.put(key, found, 0)
    return found[1]


def _read_user(text: str) -> Category:
    stripped = text.lstrip()
    if stripped.startswith(_OBSERVATION_PREFIXES):
        return Category.FACT
    if not _is_data(text):
        return Category.INSTRUCTION
    prose = _prose(text)
    asks = bool(_IMPERATIVE.search(prose) or _CONSTRAINT.search(prose))
    return Category.MIXED if asks else Category.FACT


def _classify_assistant(message: Message, text: str) -> Category:
    # 003 §4: a message that reasons and acts (tool calls, native or written as <function=…> text) is MIXED; it
    # travels with its results, so it is reduced with them, before the agent's plain reasoning.
    if message.tool_calls or _TEXT_CALL.search(text):
        return Category.MIXED
    if not _is_data_remembered(text):
        return Category.REASONING
    thinks = any(isinstance(p, ThinkingPart) for p in message.parts)
    if thinks or _PLAN.search(_prose(text)):
        return Category.MIXED
    return Category.FACT


def _prose(text: str) -> str:
    """The sentences around the data: lines outside code fences that do not look like data (first part only)."""
    kept: list[str] = []
    fenced = False
    for line in text[: _DATA_HEAVY_CHARS * 4].splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and line.strip() and not _DATA.search(line):
            kept.append(line)
    return "\n".join(kept)[:_DATA_HEAVY_CHARS]


# What _is_data reads of one text at most (issue 22: bounded work on a huge message).
_MAX_SAMPLE_CHARS = 400_000


def _is_data(text: str) -> bool:
    if len(text) <= _DATA_HEAVY_CHARS // 4 or not text.strip():
        return False  # (short text is never data: the last test below, checked first to skip reading the lines)
    # The share of data lines is taken from the two ends of a huge text (a 10 MB log reads the same as its ends).
    half = _MAX_SAMPLE_CHARS // 2
    sample = text if len(text) <= _MAX_SAMPLE_CHARS else f"{text[:half]}\n{text[-half:]}"
    lines = [line for line in sample.splitlines() if line.strip()]
    data_lines = sum(1 for line in lines if _DATA.search(line))
    if "```" in text and len(text) > _DATA_HEAVY_CHARS:
        return True
    return bool(lines) and data_lines / len(lines) >= _DATA_LINE_SHARE and len(text) > _DATA_HEAVY_CHARS // 4
