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
from itertools import repeat

from .._memo import TextMemo, size_of_strings, text_key
from ..answered import without_notes
from ..messages import Message
from .entities import bare_numbers, extract_entities_by_kind, readable

__all__ = ["Digest", "EntityStat", "MessageReading", "digest_messages", "is_read", "read_message", "split_sentences"]

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
# here). A summary of a few thousand tokens cannot carry more than its newest messages and the task at the start;
# the middle stays whole in the archive, and the summary says how many messages it did not read. 1,000 since issue
# 22's eleventh session (3,000 before): reading the newest 2,800 messages of a long slice was a third of adding and
# first compacting a 100,000-message history (their entities, and their secrets before the summary), for a summary
# of ~2,000 tokens; the recorded sessions' slices are far shorter (replays unchanged).
MAX_READ_MESSAGES = 1_000
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


# Remembered by text like entities (issue 15): the pattern costs ~60 ns a character, ~40 lines a tool output, and the
# background warming and every later compaction read the same outputs again.
_OUTCOME_MEMO_BYTES = 16 * 1024 * 1024
_outcome_memo: TextMemo[tuple[str, ...]] = TextMemo(_OUTCOME_MEMO_BYTES)
# The end of a text holding its last OUTCOME_TAIL_LINES lines is found by reading this many characters back first
# (doubled until enough lines are in it): splitting a 10 MB output into lines to keep 40 cost a second.
_TAIL_PROBE_CHARS = 8_192


def _outcome_lines(text: str) -> tuple[str, ...]:
    return _outcome_memo.get_or_compute(text_key(text), lambda: _read_outcome_lines(text), size_of_strings)


# A literal every match of _OUTCOME holds, one per alternative: a line holding none cannot match, and looking for
# them (a fast substring search each) costs a fraction of running the pattern over every line.
_OUTCOME_WORDS = ("Error", "Exception", "Traceback", "FAILED", "failed", "passed", "error:", "ERROR", "succeeded",
                  "Success", "OK", "exit code", "returned non-zero", "No such file", "not found", "Permission denied")


def _read_outcome_lines(text: str) -> tuple[str, ...]:
    lines = last_lines(text, OUTCOME_TAIL_LINES)
    tail = "\n".join(lines)
    words = [w for w in _OUTCOME_WORDS if w in tail]
    if not words:
        return ()
    found: list[str] = []
    for line in lines:
        line = line.strip()
        if (line and len(line) <= MAX_OUTCOME_LINE_CHARS and any(w in line for w in words)
                and _OUTCOME.search(line)):
            found.append(line)
    return tuple(found)


def last_lines(text: str, count: int) -> list[str]:
    """``text.splitlines()[-count:]``, reading only the end of ``text``."""
    probe = _TAIL_PROBE_CHARS
    while probe < len(text):
        lines = text[-probe:].splitlines()
        if len(lines) > count:  # the first line may be cut (or a "\r\n" split): it is not among the last ones
            return lines[-count:]
        probe *= 2
    return text.splitlines()[-count:]


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


@dataclass(frozen=True, slots=True)
class MessageReading:
    """What one message gives a digest wherever it sits: read once (when it is added), applied by every compaction.

    ``mentions`` are the entity mentions in reading order: ``(value, kind, weight, bare number)``; a bare number
    (:func:`~contextfold.summarize.entities.bare_numbers`) is not counted again for a message that already
    counted it as a number entity.
    """

    mentions: tuple[tuple[str, str, float, bool], ...] = ()
    request: str | None = None
    constraints: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    plan: tuple[str, ...] | None = None
    retained: tuple[str, ...] = ()

    def apply(self, digest: Digest, index: int) -> None:
        """Add this message's facts to ``digest`` as message ``index`` of the slice."""
        entities = digest.entities
        for value, kind, weight, bare in self.mentions:
            stat = entities.get(value)
            if stat is None:
                stat = entities[value] = EntityStat(value, kind, first=index)
            elif bare and stat.last == index and stat.kind == "number":
                continue  # already counted for this message as a number entity
            stat.score += weight
            if index > stat.last:
                stat.last = index
        if self.request is not None:
            digest.user_requests.append((index, self.request))
        for sentence in self.constraints:
            if sentence not in digest.constraints:
                digest.constraints.append(sentence)
        digest.actions.extend(self.actions)
        digest.decisions.extend((index, sentence) for sentence in self.decisions)
        digest.outcomes.extend((index, line) for line in self.outcomes)
        if self.plan is not None:
            digest.plan = list(self.plan)
        digest.retained.extend(self.retained)

    def size(self) -> int:
        """About the bytes this reading holds (for the memo's bound)."""
        strings = [m[0] for m in self.mentions]
        strings.extend(self.constraints)
        strings.extend(self.actions)
        strings.extend(self.decisions)
        strings.extend(self.outcomes)
        strings.extend(self.plan or ())
        strings.extend(self.retained)
        return size_of_strings(strings) + len(self.request or "") + 100 * len(self.mentions)


class _Mentions:
    """Collects entity mentions in reading order (what Digest.add_entities / add_numbers would count)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, float, bool]] = []

    def entities(self, text: str, source: str) -> None:
        weight = SOURCE_WEIGHTS[source]
        for kind, values in extract_entities_by_kind(text).items():
            item_weight = weight * KIND_WEIGHTS[kind]
            self.items.extend(zip(values, repeat(kind), repeat(item_weight), repeat(False)))

    def numbers(self, text: str, source: str) -> None:
        weight = SOURCE_WEIGHTS[source] * KIND_WEIGHTS["number"]
        self.items.extend(zip(dict.fromkeys(bare_numbers(text)), repeat("number"), repeat(weight), repeat(True)))


# Readings by message content (the text's hash; see contextfold._memo): 64 MB hold those of several windows.
_READING_MEMO_BYTES = 64 * 1024 * 1024
_readings: TextMemo[MessageReading] = TextMemo(_READING_MEMO_BYTES)


def _reading_key(message: Message) -> tuple[object, ...] | None:
    """The memo key of what :func:`read_message` reads of ``message``; None for summaries (read each time)."""
    kind = message.kind
    if kind == "summary":
        return None
    text = message.text
    if kind == "retain":
        return ("retain", *text_key(text))
    if message.role == "assistant":
        calls = tuple((c.name, *text_key(c.arguments)) for c in message.tool_calls)
        return ("assistant", *text_key(text), calls)
    return (message.role, *text_key(text))


def read_message(message: Message) -> MessageReading | None:
    """What ``message`` gives a digest (remembered by its content), or None for a summary (folded in as such).

    The manager reads each message when it is added (issue 22), so that compactions only assemble readings.
    """
    key = _reading_key(message)
    if key is None:
        return None
    return _readings.get_or_compute(key, lambda: _read(message), MessageReading.size)


def is_read(message: Message) -> bool:
    """Whether ``message``'s reading is remembered (digesting it would run no extraction)."""
    key = _reading_key(message)
    return key is None or key in _readings


def _read(message: Message) -> MessageReading:
    text = message.text
    if message.kind == "retain":
        return MessageReading(retained=tuple(line.strip().removeprefix("- ") for line in text.splitlines()
                                             if line.strip()))
    if message.role == "tool" or (message.role == "user" and _is_observation(text)):
        # SWE-agent writes tool output as user messages starting "OBSERVATION:"; it is output, not a request.
        return _read_tool_output(text)
    if message.role == "user":
        return _read_user(text)
    if message.role == "assistant":
        return _read_assistant(message)
    mentions = _Mentions()
    mentions.entities(text, "system")
    return MessageReading(mentions=tuple(mentions.items))


def _read_tool_output(text: str) -> MessageReading:
    # contextfold's own notes (refs, the retrieval tools' names) are not facts of the output.
    text = without_notes(text)
    mentions = _Mentions()
    mentions.entities(text, "tool")
    mentions.numbers(text, "tool")
    return MessageReading(mentions=tuple(mentions.items), outcomes=_outcome_lines(text))


def _read_user(text: str) -> MessageReading:
    mentions = _Mentions()
    mentions.entities(text, "user")
    # (Constraints are looked for where the entities are: in all of it, or at the two ends of a huge paste.)
    constraints = tuple(sentence for sentence in split_sentences(readable(text))
                        if len(sentence) <= MAX_SENTENCE_CHARS and _CONSTRAINT.search(sentence))
    return MessageReading(mentions=tuple(mentions.items), request=text.strip(), constraints=constraints)


def _read_assistant(message: Message) -> MessageReading:
    text = message.text
    mentions = _Mentions()
    actions: list[str] = []
    for call in message.tool_calls:
        args = _call_args(call.arguments)
        actions.append(_format_action(call.name, args))
        mentions.entities(" ".join(str(v) for v in args.values()), "args")
    for match in _TEXT_CALL.finditer(text):
        params = {m.group(1): m.group(2).strip() for m in _TEXT_PARAM.finditer(match.group(2))}
        actions.append(_format_action(match.group(1), dict(params)))
        mentions.entities(" ".join(params.values()), "args")
    prose = _strip_text_calls(text)
    mentions.entities(prose, "assistant")
    mentions.numbers(prose, "assistant")
    decisions = tuple(sentence for sentence in split_sentences(prose)
                      if len(sentence) <= MAX_SENTENCE_CHARS and _DECISION.search(sentence))
    plan = [_LIST_MARK.sub("", line).strip() for line in prose.splitlines() if _LIST_LINE.match(line)]
    return MessageReading(mentions=tuple(mentions.items), actions=tuple(actions), decisions=decisions,
                          plan=tuple(plan) if len(plan) >= 2 else None)


def digest_messages(messages: Iterable[Message], previous_summary: str | None = None) -> Digest:
    """Read ``messages`` (and an earlier summary) into a :class:`Digest`.

    Each message's reading is remembered (:func:`read_message`): a digest of messages read before only assembles.
    """
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
        reading = read_message(message)
        if reading is None:
            _read_previous_summary(digest, message.text)
        else:
            reading.apply(digest, index)
    # A request both in an earlier summary and still in the part summarized (the user block) is listed once.
    seen: set[str] = set()
    unique = []
    for position, request in digest.user_requests:
        if request not in seen:
            seen.add(request)
            unique.append((position, request))
    digest.user_requests = unique
    return digest
