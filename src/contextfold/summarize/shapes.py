"""What each summary strategy looks like when the extractive summarizer writes it (004 §3).

``task_state`` (the default) is the extractive summarizer's own layout: the user's requests, the key entities,
decisions, progress and next steps, with constraints kept verbatim in ``retain``. The other strategies are shaped
here from the same digest, so that choosing one changes the summary without a model:

- ``brief`` — a few short bullets (goal, latest request, outcomes, decisions), each citing the message it came
  from (``[msg 7]``, plus ``ref=tout_…`` when the full tool output is in the cache), in at most
  :data:`BRIEF_SHARE` of the budget;
- ``decision_log`` — the decisions in the order they were taken, each with its reason when the text gives one,
  and the state-changing tool calls (a booking, a cancellation, a file written) as decisions the agent acted on,
  then the key ids they concern;
- ``code_delta`` — the files changed (by edit tools or diffs), the functions, classes and APIs touched, the tests
  and their outcomes, and the commands run (a part of a session with no code in it falls back to task_state).

``custom`` keeps the task_state layout: a custom prompt is an instruction to a model, which the extractive
summarizer cannot follow (its words still boost the entity kinds they name). Everything stays deterministic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..messages import Message
from .digest import _TEXT_CALL, _TEXT_PARAM, Digest, EntityStat, split_sentences

__all__ = ["SHAPED_STRATEGIES", "shape_summary"]

SHAPED_STRATEGIES = ("brief", "decision_log", "code_delta")
# A brief summary is meant to be short whatever the budget: a fraction of it, but never below a usable size.
BRIEF_SHARE = 0.4
BRIEF_MIN_TOKENS = 120
# One brief bullet: about two lines of text.
BRIEF_BULLET_CHARS = 160
BRIEF_ENTITIES = 12
# The latest actions that changed something: what the agent did, in a brief.
BRIEF_ACTS = 3
# A decision or reason longer than this is a paragraph, not a ledger line.
LEDGER_CLAUSE_CHARS = 240
CODE_COMMANDS = 8

_TRUNCATION = "…"
# A reason inside the sentence that states the decision.
_REASON_SPLIT = re.compile(
    r"\s*(?:,\s*)?\b(because|since|so that|as otherwise|due to|given that|in order to|to avoid|to prevent|"
    r"to make sure|to ensure)\b\s*",
    re.IGNORECASE,
)
# A sentence right after a decision that explains it.
_REASON_NEXT = re.compile(r"^(?:because|since|this (?:is|was|way|keeps|avoids|means)|that (?:is|way)|otherwise|"
                          r"the reason|so that)\b", re.IGNORECASE)
# Tool names (or a ``command=`` argument) that only read: everything else changes the world and is a decision.
_READ_ONLY = re.compile(r"^(?:get|list|read|search|find|view|show|lookup|fetch|open|cat|ls|grep|think|calculate|"
                        r"submit|tool_output_cache|history_search)", re.IGNORECASE)
_EDIT_COMMANDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "edit", "append", "patch"})
_EDIT_TOOLS = re.compile(r"(?:^|_)(?:write|edit|create|patch|replace|insert|apply)(?:_|$)", re.IGNORECASE)
_SHELLS = frozenset({"bash", "shell", "run", "execute", "run_command", "terminal"})
_PATH_KEYS = ("path", "file", "file_path", "filename", "filepath", "target_file")
_DIFF_FILE = re.compile(r"^(?:\+\+\+ b/|diff --git a/\S+ b/)(\S+)", re.MULTILINE)
_SYMBOL = re.compile(r"^[ \t+-]*(?:async\s+)?(?:def|class|function|func|fn|interface|struct)\s+([A-Za-z_]\w*)",
                     re.MULTILINE)
_HUNK_SYMBOL = re.compile(r"^@@[^@]*@@\s*(?:async\s+)?(?:def|class|function|func|fn)\s+([A-Za-z_]\w*)", re.MULTILINE)
_SHELL_EDIT = re.compile(r"\b(?:sed\s+-i|tee|cat\s*>|>\s*)\s*['\"]?([\w./-]+\.\w+)")


@dataclass(slots=True)
class _Section:
    """Items of one section, best first, each with the key that puts it back in reading order."""

    title: str
    items: list[tuple[str, int]] = field(default_factory=list)
    share: float = 0.0


@dataclass(frozen=True, slots=True)
class _Call:
    index: int
    name: str
    args: dict[str, str]


def shape_summary(messages: Sequence[Message], digest: Digest, ranked: Sequence[EntityStat], strategy: str,
                  limit: int, count: Callable[[str], int]) -> str | None:
    """The summary ``strategy`` asks for within ``limit`` tokens, or None for the task_state layout.

    Args:
        messages: The messages being summarized (for citations and tool calls).
        digest: Their digest (:func:`~contextfold.summarize.digest.digest_messages`).
        ranked: Entities best first.
        strategy: ``brief``, ``decision_log`` or ``code_delta``; anything else returns None.
        limit: Tokens the summary text may take.
        count: The budget tokenizer.
    """
    if strategy == "brief":
        budget = min(limit, max(BRIEF_MIN_TOKENS, int(limit * BRIEF_SHARE)))
        return _fit(f"Brief summary of {digest.count} earlier messages.", _brief(messages, digest, ranked),
                    budget, count)
    if strategy == "decision_log":
        return _fit(f"Decision log of {digest.count} earlier messages, oldest first.",
                    _decision_log(messages, digest, ranked), limit, count)
    if strategy == "code_delta":
        sections = _code_delta(messages, digest, ranked)
        if not sections:
            return None
        return _fit(f"Code changes in {digest.count} earlier messages.", sections, limit, count)
    return None


# -- brief -------------------------------------------------------------------------------------------------------


def _brief(messages: Sequence[Message], digest: Digest, ranked: Sequence[EntityStat]) -> list[_Section]:
    requests = [(i, t) for i, t in digest.user_requests if t]
    goal = _Section("Goal", share=0.3)
    if requests:
        i, text = requests[0]
        goal.items.append((_short(text) + _cite(messages, i), 0))
        if len(requests) > 1:
            j, latest = requests[-1]
            goal.items.append((f"latest request: {_short(latest)}{_cite(messages, j)}", 1))
    points = _Section("Key points", share=0.5)
    outcomes = list(dict.fromkeys(digest.outcomes))[-4:]
    decisions = list(dict.fromkeys(digest.decisions))[-4:]
    # Newest first in priority; rendered in message order.
    acts = [(c.index, f"did: {_call_text(c)}") for c in _acts(messages)[-BRIEF_ACTS:]]
    for i, text in reversed(sorted([*outcomes, *decisions, *acts])):
        points.items.append((_short(text) + _cite(messages, i), i))
    entities = _Section("Key entities", share=0.2)
    names = [s.value for s in ranked[:BRIEF_ENTITIES]]
    if names:
        entities.items.append((", ".join(names), 0))
    return [goal, points, entities]


# -- decision log ------------------------------------------------------------------------------------------------


def _decision_log(messages: Sequence[Message], digest: Digest, ranked: Sequence[EntityStat]) -> list[_Section]:
    entries: list[tuple[int, str]] = []
    for i, sentence in dict.fromkeys(digest.decisions):
        decision, reason = _split_reason(sentence)
        if not reason and 0 <= i < len(messages):
            reason = _reason_after(messages[i].text, sentence)
        line = _clip(decision, LEDGER_CLAUSE_CHARS) + (f" — reason: {_clip(reason, LEDGER_CLAUSE_CHARS)}"
                                                       if reason else "")
        entries.append((i, line + _cite(messages, i)))
    for call in _acts(messages):
        reason = _reason_for_call(messages[call.index])
        line = f"acted: {_call_text(call)}" + (f" — reason: {_clip(reason, LEDGER_CLAUSE_CHARS)}" if reason else "")
        entries.append((call.index, line + _cite(messages, call.index)))
    ledger = _Section("Decisions", share=0.75)
    # Priority: newest first (the latest decisions bind the next step); rendered oldest first.
    chronological = sorted(entries, key=lambda e: e[0])
    for position in reversed(range(len(chronological))):
        ledger.items.append((chronological[position][1], position))
    context = _Section("Task", share=0.15)
    requests = [(i, t) for i, t in digest.user_requests if t]
    if requests:
        context.items.append((_short(requests[0][1]) + _cite(messages, requests[0][0]), 0))
    # The ids the decisions are about (the user, the records touched), so the next step can act on them.
    entities = _Section("Key entities", share=0.1)
    names = [s.value for s in ranked[:BRIEF_ENTITIES]]
    if names:
        entities.items.append((", ".join(names), 0))
    return [context, ledger, entities]


def _acts(messages: Sequence[Message]) -> list[_Call]:
    """The tool calls that change something (a booking, a file written), not the ones that only look."""
    out: list[_Call] = []
    for call in _calls(messages):
        if call.name in _SHELLS:
            if _SHELL_EDIT.search(call.args.get("command", "")):
                out.append(call)
        elif not _READ_ONLY.match(call.args.get("command", "") or call.name):
            out.append(call)
    return out


def _split_reason(sentence: str) -> tuple[str, str]:
    match = _REASON_SPLIT.search(sentence)
    if match is None or match.start() < 8:
        return sentence.strip(), ""
    return sentence[: match.start()].strip().rstrip(","), sentence[match.start():].strip(" ,")


def _reason_after(text: str, sentence: str) -> str:
    sentences = split_sentences(text)
    for k, s in enumerate(sentences[:-1]):
        if s == sentence and _REASON_NEXT.match(sentences[k + 1]):
            return sentences[k + 1]
    return ""


def _reason_for_call(message: Message) -> str:
    """The assistant's own sentence before acting, when it says why (``because …``)."""
    prose = _TEXT_CALL.sub("", message.text)
    for sentence in split_sentences(prose):
        _, reason = _split_reason(sentence)
        if reason:
            return reason
    return ""


# -- code delta --------------------------------------------------------------------------------------------------


def _code_delta(messages: Sequence[Message], digest: Digest, ranked: Sequence[EntityStat]) -> list[_Section]:
    changed: dict[str, list[int]] = {}
    read: dict[str, int] = {}
    symbols: dict[str, int] = {}
    commands: list[tuple[int, str]] = []
    for call in _calls(messages):
        command = call.args.get("command", "")
        path = next((call.args[k] for k in _PATH_KEYS if call.args.get(k)), "")
        # str_replace_editor(command=view) reads: the command decides when there is one, else the tool's name.
        edits = command in _EDIT_COMMANDS if command and call.name not in _SHELLS else bool(
            _EDIT_TOOLS.search(call.name))
        if call.name in _SHELLS and command:
            commands.append((call.index, _clip(" ".join(command.split()), 160)))
            for match in _SHELL_EDIT.finditer(command):
                changed.setdefault(match.group(1), []).append(call.index)
            continue
        if path and edits:
            changed.setdefault(path, []).append(call.index)
            for key in ("new_str", "file_text", "content", "patch", "diff", "insert_text"):
                for name in _SYMBOL.findall(call.args.get(key, "")):
                    symbols.setdefault(name, call.index)
        elif path:
            read.setdefault(path, call.index)
    for i, m in enumerate(messages):
        text = m.text
        if "diff --git" in text or "+++ b/" in text:
            for path in dict.fromkeys(_DIFF_FILE.findall(text)):
                # A diff names files relative to the repository; the edit tools used absolute paths.
                known = next((p for p in changed if p.endswith("/" + path)), path)
                if i not in changed.get(known, []):
                    changed.setdefault(known, []).append(i)
            for name in [*_HUNK_SYMBOL.findall(text), *_SYMBOL.findall(_added_lines(text))]:
                symbols.setdefault(name, i)
    files = _Section("Files changed", share=0.35)
    for path, where in sorted(changed.items(), key=lambda kv: (-len(kv[1]), kv[1][0])):
        times = f" ({len(where)} edits)" if len(where) > 1 else ""
        files.items.append((f"{path}{times}{_cite(messages, where[-1])}", where[0]))
    apis = _Section("Functions, classes and APIs touched", share=0.25)
    if symbols:
        apis.items.append((", ".join(sorted(symbols, key=lambda s: symbols[s])), 0))
    tests = _Section("Tests and outcomes", share=0.2)
    test_names = [s.value for s in ranked if s.kind == "test"][:10]
    if test_names:
        tests.items.append(("tests: " + ", ".join(test_names), -1))
    for i, text in list(dict.fromkeys(digest.outcomes))[-6:]:
        tests.items.append((_short(text) + _cite(messages, i), i))
    runs = _Section("Commands run", share=0.1)
    for i, command in reversed(commands[-CODE_COMMANDS:]):
        runs.items.append((f"`{command}`{_cite(messages, i)}", i))
    looked = _Section("Files read", share=0.1)
    for path, i in sorted(read.items(), key=lambda kv: kv[1]):
        if path not in changed:
            looked.items.append((path, i))
    if not changed and not symbols and not commands:
        return []  # no code in this part of the session: the task_state layout says more
    return [files, apis, tests, runs, looked]


def _added_lines(diff: str) -> str:
    return "\n".join(line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))


# -- shared ------------------------------------------------------------------------------------------------------


def _calls(messages: Sequence[Message]) -> list[_Call]:
    """Every tool call, native or written as ``<function=…>`` text, with string arguments."""
    out: list[_Call] = []
    for i, m in enumerate(messages):
        if m.role != "assistant":
            continue
        for call in m.tool_calls:
            try:
                parsed = json.loads(call.arguments) if call.arguments else {}
            except json.JSONDecodeError:
                parsed = {}
            args = parsed if isinstance(parsed, dict) else {}
            strings = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in args.items()}
            out.append(_Call(i, call.name, strings))
        for match in _TEXT_CALL.finditer(m.text):
            params = {p.group(1): p.group(2).strip() for p in _TEXT_PARAM.finditer(match.group(2))}
            out.append(_Call(i, match.group(1), params))
    return out


def _call_text(call: _Call) -> str:
    shown = [f"{k}={_clip(' '.join(v.split()), 60)}" for k, v in call.args.items()]
    return _clip(f"{call.name}({', '.join(shown)})", LEDGER_CLAUSE_CHARS)


def _cite(messages: Sequence[Message], index: int) -> str:
    """`` [msg N]`` (1-based in the summarized part), with the tool output ref when the full text is cached."""
    if not 0 <= index < len(messages):
        return ""
    refs = [str(m.meta["ref"]) for m in _answers(messages, index) if m.meta.get("ref")]
    ref = messages[index].meta.get("ref")
    if ref:
        refs.insert(0, str(ref))
    return f" [msg {index + 1}{''.join(f', ref={r}' for r in dict.fromkeys(refs))}]"


def _answers(messages: Sequence[Message], index: int) -> list[Message]:
    ids = {c.id for c in messages[index].tool_calls}
    return [m for m in messages[index + 1: index + 1 + len(ids) * 2] if m.tool_call_id in ids] if ids else []


def _short(text: str) -> str:
    return _clip(" ".join(text.split()), BRIEF_BULLET_CHARS)


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1].rstrip() + _TRUNCATION


def _fit(header: str, sections: list[_Section], limit: int, count: Callable[[str], int]) -> str:
    """Fill each section to its share of ``limit``, hand leftovers on in order, render, and trim until it fits."""
    taken: list[list[tuple[str, int]]] = [[] for _ in sections]
    used = count(header)

    def take(k: int, room: int) -> None:
        nonlocal used
        spent = 0
        for item in sections[k].items:
            if item in taken[k]:
                continue
            cost = count(item[0]) + 2
            if spent + cost <= room and used + cost <= limit:
                taken[k].append(item)
                spent += cost
                used += cost

    for k, section in enumerate(sections):
        take(k, int(limit * section.share))
    for k in range(len(sections)):
        take(k, limit)
    text = _render(header, sections, taken)
    while count(text) > limit and any(taken):
        last = max(k for k, items in enumerate(taken) if items)
        taken[last].pop()
        text = _render(header, sections, taken)
    if count(text) > limit:
        return header if count(header) <= limit else ""
    return text


def _render(header: str, sections: list[_Section], taken: list[list[tuple[str, int]]]) -> str:
    lines = [header]
    for section, items in zip(sections, taken, strict=True):
        if not items:
            continue
        lines.append(f"## {section.title}")
        numbered = section.title == "Decisions"
        for n, (text, _) in enumerate(sorted(items, key=lambda item: item[1]), 1):
            lines.append(f"{n}. {text}" if numbered else f"- {text}")
    return "\n".join(lines)
