"""Reading a slice of history into the raw material of an extractive summary.

A :class:`Digest` holds, per message and in order: user requests, constraint sentences, entity scores, the actions
the agent took (tool calls, native or written as ``<function=…>`` text), decision sentences, outcome lines from tool
output, and the latest plan. It knows nothing about budgets; :mod:`.extractive` chooses what fits.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from ..answered import without_notes
from ..messages import Message
from .entities import bare_numbers, extract_entities_by_kind

__all__ = ["Digest", "EntityStat", "digest_messages", "split_sentences"]

# How much one mention counts, by where it was seen: the agent acting on a name (tool arguments) or the user
# naming it says more than a name scrolling past in a file listing.
SOURCE_WEIGHTS: dict[str, float] = {"user": 3.0, "args": 3.0, "assistant": 2.0, "tool": 1.0, "summary": 4.0,
                                    "system": 0.5}
# Kinds an agent most often needs again by exact spelling weigh more than incidental numbers and flags.
KIND_WEIGHTS: dict[str, float] = {"path": 1.5, "error": 1.3, "test": 1.3, "id": 1.2, "email": 1.2, "url": 1.0,
                                  "identifier": 1.0, "number": 0.8, "flag": 0.6}
# A name still in use at the end of the slice is worth more than one from its start (up to this bonus).
RECENCY_BONUS = 2.0
# Sentences longer than this are prose paragraphs, not constraints or decisions one can keep verbatim.
MAX_SENTENCE_CHARS = 300
# Tool arguments longer than this are file bodies or patches: named, not copied, in the action log.
MAX_ARG_CHARS = 160
# Outcome lines are read from the end of each tool output, where results and errors appear.
OUTCOME_TAIL_LINES = 40
# A slice longer than this is read at its two ends only (issue 12: a 100,000-message emergency compaction spent 4.5 s
# here). A summary of a few thousand tokens cannot carry more than its newest few thousand messages and the task
# at the start; the middle stays whole in the archive, and the summary says how many messages it did not read.
MAX_READ_MESSAGES = 3_000
READ_HEAD_MESSAGES = 200
MAX_OUTCOME_LINE_CHARS = 240

_CONSTRAINT = re.compile(
    r"\b(must|never|always|do not|don't|dont|should|shouldn't|only|without|avoid|prefer|prefers|required?|"
    r"make sure|ensure|no more than|at least|at most|not allowed|cannot|can't|want|wants|do ?n[o']t want|"
    r"need|needs|deadline|before|after|budget|limit)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(because|since|instead|decided?|decision|chose|choose|approach|root cause|the (?:issue|problem|bug|fix|cause)"
    r" (?:is|was)|this means|so that|we need to|we should|i will|i'll|the plan|going to|rather than|won't|will not)\b",
    re.IGNORECASE,
)
# (Only ever searched for a yes/no: "a word ending in Error" is "Error" before a word boundary, and without the
# leading \b\w* the engine no longer rescans every word of every line; a third of a long compaction's time.)
_OUTCOME = re.compile(
    r"((?:Error|Exception)\b|\bTraceback\b|\bFAILED\b|\bfailed\b|\bpassed\b|\berror:|\bERROR\b|"
    r"\bsucceeded\b|\bSuccess\b|^OK\b|exit code|returned non-zero|No such file|not found|Permission denied)",
    re.MULTILINE,
)
_LIST_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)]|\[[ xX]\])\s+\S")
_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\[[ xX]\])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|\n+")
_TEXT_CALL = re.compile(r"<function=([\w.-]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_TEXT_PARAM = re.compile(r"<parameter=([\w.-]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL)
_OBSERVATION = "observation:"


def _is_observation(text: str) -> bool:
    return text[:40].lstrip().lower().startswith(_OBSERVATION)


@dataclass(slots=True)
class EntityStat:
    """How often, where and how recently one entity was mentioned."""

    value: str
    kind: str
    score: float = 0.0
    first: int = 0
    last: int = 0


@dataclass(slots=True)
class Digest:
    """The extractable facts of a message slice, in message order."""

    count: int = 0
    user_requests: list[tuple[int, str]] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    entities: dict[str, EntityStat] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    decisions: list[tuple[int, str]] = field(default_factory=list)
    outcomes: list[tuple[int, str]] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)
    retained: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)
    unread: int = 0  # messages in the middle of a long slice that were not read (see MAX_READ_MESSAGES)

    def add_entities(self, text: str, source: str, index: int) -> None:
        """Count the entities of ``text`` once for message ``index``, weighted by where they were seen."""
        weight = SOURCE_WEIGHTS[source]
        for kind, values in extract_entities_by_kind(text).items():
            for value in values:
                stat = self.entities.get(value)
                if stat is None:
                    stat = self.entities[value] = EntityStat(value, kind, first=index)
                stat.score += weight * KIND_WEIGHTS[kind]
                stat.last = max(stat.last, index)

    def add_numbers(self, text: str, source: str, index: int) -> None:
        """Count the bare numbers of three digits or more (amounts, counts, ids) of ``text`` as number entities.

        Entity extraction keeps numbers only with a unit or a currency; an agent also reuses bare ones (a price in a
        JSON answer, a count in a log). Line numbers of listings are left out (see :func:`bare_numbers`).
        """
        weight = SOURCE_WEIGHTS[source] * KIND_WEIGHTS["number"]
        for value in dict.fromkeys(bare_numbers(text)):
            stat = self.entities.get(value)
            if stat is None:
                stat = self.entities[value] = EntityStat(value, "number", first=index)
            elif stat.last == index and stat.kind == "number":
                continue  # already counted for this message by add_entities
            stat.score += weight
            stat.last = max(stat.last, index)

    def ranked_entities(self, boost_kinds: Iterable[str] = ()) -> list[EntityStat]:
        """Entities best first: weighted mentions plus recency; ties broken by first appearance (deterministic)."""
        boosted = set(boost_kinds)
        span = max(self.count, 1)

        def key(stat: EntityStat) -> tuple[float, int, str]:
            score = stat.score + RECENCY_BONUS * (stat.last + 1) / span
            if stat.kind in boosted:
                score *= 3
            return (-score, stat.first, stat.value)

        return sorted(self.entities.values(), key=key)


def split_sentences(text: str) -> list[str]:
    """Sentences and lines of ``text``, stripped, empty ones dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _strip_text_calls(text: str) -> str:
    return _TEXT_CALL.sub("", text)


def _format_action(name: str, args: dict[str, object]) -> str:
    shown: list[str] = []
    for key, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = " ".join(text.split())
        if len(text) > MAX_ARG_CHARS:
            shown.append(f"{key}=<{len(text)} chars>")
        else:
            shown.append(f"{key}={text}")
    return f"{name}({', '.join(shown)})"


def _call_args(arguments: str) -> dict[str, object]:
    try:
        parsed = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def _read_tool_output(digest: Digest, index: int, text: str) -> None:
    # contextfold's own notes (refs, the retrieval tools' names) are not facts of the output.
    text = without_notes(text)
    digest.add_entities(text, "tool", index)
    digest.add_numbers(text, "tool", index)
    digest.outcomes.extend((index, line) for line in _outcome_lines(text))


# Cached by text like entities (issue 15): the pattern costs ~60 ns a character, ~40 lines a tool output, and the
# background warming and every later compaction read the same outputs again.
@lru_cache(maxsize=16_384)
def _outcome_lines(text: str) -> tuple[str, ...]:
    found: list[str] = []
    tail = text.splitlines()[-OUTCOME_TAIL_LINES:]
    for line in tail:
        line = line.strip()
        if line and len(line) <= MAX_OUTCOME_LINE_CHARS and _OUTCOME.search(line):
            found.append(line)
    return tuple(found)


def _read_assistant(digest: Digest, index: int, message: Message) -> None:
    text = message.text
    for call in message.tool_calls:
        args = _call_args(call.arguments)
        digest.actions.append(_format_action(call.name, args))
        digest.add_entities(" ".join(str(v) for v in args.values()), "args", index)
    for match in _TEXT_CALL.finditer(text):
        params = {m.group(1): m.group(2).strip() for m in _TEXT_PARAM.finditer(match.group(2))}
        digest.actions.append(_format_action(match.group(1), dict(params)))
        digest.add_entities(" ".join(params.values()), "args", index)
    prose = _strip_text_calls(text)
    digest.add_entities(prose, "assistant", index)
    digest.add_numbers(prose, "assistant", index)
    for sentence in split_sentences(prose):
        if len(sentence) <= MAX_SENTENCE_CHARS and _DECISION.search(sentence):
            digest.decisions.append((index, sentence))
    plan = [_LIST_MARK.sub("", line).strip() for line in prose.splitlines() if _LIST_LINE.match(line)]
    if len(plan) >= 2:
        digest.plan = plan


def _read_user(digest: Digest, index: int, text: str) -> None:
    digest.user_requests.append((index, text.strip()))
    digest.add_entities(text, "user", index)
    for sentence in split_sentences(text):
        if len(sentence) <= MAX_SENTENCE_CHARS and _CONSTRAINT.search(sentence) and sentence not in digest.constraints:
            digest.constraints.append(sentence)


def _read_previous_summary(digest: Digest, text: str) -> None:
    """Fold an earlier summary in: its entities count strongly, its lines are kept as older material."""
    digest.add_entities(text, "summary", 0)
    section = ""
    request: list[str] | None = None  # the lines of the user request being read back
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("## "):
            section = line[3:].strip().lower()
            _close_request(digest, request)
            request = None
            continue
        if section == "user requests":
            # Requests are written byte for byte after "- ", their own lines unindented: a line without the bullet
            # continues the request above (read line by line, a multi-line request came back as many requests,
            # next to its verbatim copy from the user block: the task twice in every later summary).
            if raw.startswith("- "):
                _close_request(digest, request)
                request = [raw[2:]]
            elif request is not None:
                request.append(raw)
            continue
        if not line or section == "key entities":
            continue  # entities are re-ranked above, together with the new ones
        item = line[2:] if line.startswith("- ") else line
        if section == "decisions":
            digest.decisions.append((-1, item))
        elif section not in {"progress", "next steps"}:
            digest.earlier.append(item)
    _close_request(digest, request)


def _close_request(digest: Digest, request: list[str] | None) -> None:
    if request is not None:
        text = "\n".join(request).strip()
        if text:
            digest.user_requests.append((-1, text))


def digest_messages(messages: Iterable[Message], previous_summary: str | None = None) -> Digest:
    """Read ``messages`` (and an earlier summary) into a :class:`Digest`."""
    digest = Digest()
    if previous_summary:
        _read_previous_summary(digest, previous_summary)
    items = list(messages)
    digest.count = len(items)
    indexes: Iterable[int] = range(len(items))
    if len(items) > MAX_READ_MESSAGES:
        tail_start = len(items) - (MAX_READ_MESSAGES - READ_HEAD_MESSAGES)
        digest.unread = tail_start - READ_HEAD_MESSAGES
        indexes = itertools.chain(range(READ_HEAD_MESSAGES), range(tail_start, len(items)))
    for index in indexes:  # (positions stay those of the whole slice: recency is measured against all of it)
        message = items[index]
        text = message.text
        if message.kind == "summary":
            _read_previous_summary(digest, text)
        elif message.kind == "retain":
            digest.retained.extend(line.strip().removeprefix("- ") for line in text.splitlines() if line.strip())
        elif message.role == "tool" or (message.role == "user" and _is_observation(text)):
            # SWE-agent writes tool output as user messages starting "OBSERVATION:"; it is output, not a request.
            _read_tool_output(digest, index, text)
        elif message.role == "user":
            _read_user(digest, index, text)
        elif message.role == "assistant":
            _read_assistant(digest, index, message)
        else:
            digest.add_entities(text, "system", index)
    # A request both in an earlier summary and still in the part summarized (the user block) is listed once.
    seen: set[str] = set()
    unique = []
    for position, request in digest.user_requests:
        if request not in seen:
            seen.add(request)
            unique.append((position, request))
    digest.user_requests = unique
    return digest
