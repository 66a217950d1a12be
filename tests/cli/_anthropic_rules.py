"""What the Anthropic Messages API documents it refuses, checked on the JSONL form ``convert --to anthropic`` writes.

Written from the API's documentation and its error messages, apart from the codec's own ``anthropic.validate`` (which
keeps to what a stored history may hold): the system prompt travels apart, so system lines may only head the file;
the conversation opens with the user and alternates roles; no content is empty and no text block blank (tool results'
blocks included); a ``tool_use`` id is letters, digits, ``_`` and ``-``, unique; each ``tool_use`` is answered by a
``tool_result`` at the head of the very next user turn, and each ``tool_result`` answers one there; in an assistant
turn that uses tools, thinking comes first; a final assistant turn (a prefill) does not end in whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["refusals"]

_ID = re.compile(r"[A-Za-z0-9_-]+")
_THINKING = ("thinking", "redacted_thinking")


def refusals(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each reason the API would refuse ``items`` (one line each, naming the line), or ``[]``."""
    problems: list[str] = []
    turns: list[tuple[int, Mapping[str, Any]]] = []
    for n, item in enumerate(items):
        if item.get("role") in ("system", "developer"):
            if turns:
                problems.append(f"line {n}: a {item['role']} message after the conversation started")
        elif item.get("role") in ("user", "assistant"):
            turns.append((n, item))
        else:
            problems.append(f"line {n}: role {item.get('role')!r}")
    if turns and turns[0][1]["role"] != "user":
        problems.append(f"line {turns[0][0]}: the first turn is not the user's")
    used: set[str] = set()
    waiting: list[str] = []  # the tool_use ids of the assistant turn just before
    for k, (n, turn) in enumerate(turns):
        if k and turn["role"] == turns[k - 1][1]["role"]:
            problems.append(f"line {n}: a second {turn['role']} turn in a row")
        blocks = _blocks(turn["content"])
        final_assistant = turn["role"] == "assistant" and k == len(turns) - 1
        if not blocks and not final_assistant:
            problems.append(f"line {n}: empty content")
        problems.extend(f"line {n}: {p}" for p in _blank_texts(blocks))
        if turn["role"] == "user":
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            head = [b.get("tool_use_id") for b in blocks[: len(results)] if b.get("type") == "tool_result"]
            if head != results:
                problems.append(f"line {n}: a tool_result after another block")
            if sorted(map(str, results)) != sorted(waiting):
                problems.append(f"line {n}: results {results} answer the calls {waiting} of the turn before")
            waiting = []
            continue
        if waiting:
            problems.append(f"line {n}: calls {waiting} are not answered by the next turn")
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        waiting = [str(b.get("id")) for b in uses]
        for call_id in waiting:
            if not _ID.fullmatch(call_id):
                problems.append(f"line {n}: tool_use id {call_id!r}")
            if call_id in used:
                problems.append(f"line {n}: tool_use id {call_id!r} used before")
            used.add(call_id)
        kinds = [b.get("type") for b in blocks if b.get("type") != "compaction"]
        first_other = next((i for i, kind in enumerate(kinds) if kind not in _THINKING), len(kinds))
        if uses and any(kind in _THINKING for kind in kinds[first_other:]):
            problems.append(f"line {n}: a thinking block after another block in a turn that uses tools")
    if waiting:
        problems.append(f"calls {waiting} of the last turn are not answered")
    if turns and turns[-1][1]["role"] == "assistant":
        blocks = _blocks(turns[-1][1]["content"])
        if blocks and blocks[-1].get("type") == "text" and blocks[-1]["text"] != blocks[-1]["text"].rstrip():
            problems.append(f"line {turns[-1][0]}: final assistant content ends with whitespace")
    return problems


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def _blank_texts(blocks: list[Mapping[str, Any]]) -> list[str]:
    problems = []
    for block in blocks:
        inner = block.get("content") if block.get("type") == "tool_result" else None
        for text_block in [block, *(inner if isinstance(inner, list) else ())]:
            if text_block.get("type") == "text" and not str(text_block.get("text", "")).strip():
                problems.append("a blank text block")
    return problems
