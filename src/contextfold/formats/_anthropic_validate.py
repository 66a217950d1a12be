"""What the Anthropic Messages API rejects, checked on message dicts (the JSONL form or a request's ``messages``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InvalidHistory
from ._call_ids import ANTHROPIC_IDS, check_call_id
from ._common import as_items, expect_list, expect_mapping, expect_str, role_of

__all__ = ["validate"]

_THINKING = frozenset({"thinking", "redacted_thinking"})
_COMPACTION = "compaction"


def validate(items: Iterable[Mapping[str, Any]]) -> None:
    """Raise :class:`InvalidHistory` for what the Anthropic Messages API rejects.

    Checked: roles (``system``/``developer`` items are allowed: they travel apart); the first turn is the user's;
    no empty content or blank text block (except a final assistant turn); ``tool_use`` ids unique in the request
    (not only within a turn); every ``tool_use`` answered by a
    ``tool_result`` at the head of the very next user turn, and no ``tool_result`` without its ``tool_use`` there;
    ``tool_use`` input an object; thinking blocks first in an assistant turn that calls tools; a compaction block
    only in an assistant turn, and one that holds a summary only as the first block of the conversation (which may
    then open with it) and only once.
    """
    messages = as_items(items)
    pending: dict[str, int] = {}  # tool_use ids of the previous assistant turn -> that turn's index
    used: set[str] = set()  # every tool_use id so far: the API takes each once per request
    started = False
    for index, raw in enumerate(messages):
        role = role_of(raw)
        if role in ("system", "developer"):
            _check_system(raw.get("content"), index)
            continue
        if role not in ("user", "assistant"):
            expected = ["assistant", "developer", "system", "user"]
            raise InvalidHistory(f"unknown role {role!r}; expected one of {expected}", index=index, field="role")
        blocks = _blocks(raw.get("content"), index, final_assistant=role == "assistant" and index == len(messages) - 1)
        opens_with_compaction = role == "assistant" and bool(blocks) and _summary_compaction(blocks[0])
        if not started and role != "user" and not opens_with_compaction:
            raise InvalidHistory("the first message must be a user message", index=index, field="role")
        _check_compaction(blocks, index, first=not started)
        started = True
        if role == "user":
            _check_user(blocks, index, pending)
            pending = {}
        else:
            if pending:
                _unanswered(pending)
            pending = _check_assistant(blocks, index, used)
    if pending:
        _unanswered(pending)


def _unanswered(pending: Mapping[str, int]) -> None:
    call_id, index = next(iter(pending.items()))
    problem = f"tool_use {call_id!r} has no tool_result at the head of the next user turn"
    raise InvalidHistory(problem, index=index, field="content")


def _check_system(content: Any, index: int) -> None:
    if isinstance(content, str):
        return
    for k, block in enumerate(expect_list(content, index, "content")):
        block = expect_mapping(block, index, f"content[{k}]")
        if block.get("type") != "text":
            raise InvalidHistory("system content must be text blocks", index=index, field=f"content[{k}].type")


def _blocks(content: Any, index: int, *, final_assistant: bool) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        if not content.strip() and not final_assistant:
            raise InvalidHistory("content must not be empty", index=index, field="content")
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks = [expect_mapping(b, index, f"content[{k}]") for k, b in enumerate(expect_list(content, index, "content"))]
    if not blocks and not final_assistant:
        raise InvalidHistory("content must not be empty", index=index, field="content")
    for k, block in enumerate(blocks):
        kind = expect_str(block.get("type"), index, f"content[{k}].type", nonempty=True)
        if kind == "text" and not expect_str(block.get("text"), index, f"content[{k}].text").strip():
            problem = "text content blocks must contain non-whitespace text"
            raise InvalidHistory(problem, index=index, field=f"content[{k}].text")
    return blocks


def _summary_compaction(block: Mapping[str, Any]) -> bool:
    # A compaction block with null content is a compaction that failed: a no-op the provider accepts anywhere.
    content = block.get("content")
    return block.get("type") == _COMPACTION and isinstance(content, str) and bool(content)


def _check_compaction(blocks: list[Mapping[str, Any]], index: int, *, first: bool) -> None:
    for k, block in enumerate(blocks):
        if block.get("type") != _COMPACTION:
            continue
        content = block.get("content")
        if content is not None and not isinstance(content, str):
            raise InvalidHistory("expected a string or null", index=index, field=f"content[{k}].content")
        if content == "":
            raise InvalidHistory("a compaction block's content must not be empty (null for a failed compaction)",
                                 index=index, field=f"content[{k}].content")
        if _summary_compaction(block) and not (first and k == 0):
            raise InvalidHistory("a compaction block must be the first block of the conversation; send only the "
                                 "latest one, without what it replaced", index=index, field=f"content[{k}]")


def _check_user(blocks: list[Mapping[str, Any]], index: int, pending: Mapping[str, int]) -> None:
    answered: set[str] = set()
    seen_other = False
    for k, block in enumerate(blocks):
        field = f"content[{k}]"
        kind = block.get("type")
        if kind == "tool_use" or kind in _THINKING or kind == _COMPACTION:
            raise InvalidHistory(f"a user turn cannot hold a {kind} block", index=index, field=f"{field}.type")
        if kind != "tool_result":
            seen_other = True
            continue
        call_id = expect_str(block.get("tool_use_id"), index, f"{field}.tool_use_id", nonempty=True)
        if call_id not in pending:
            problem = f"tool_result {call_id!r} does not answer a tool_use of the assistant turn right before it"
            raise InvalidHistory(problem, index=index, field=f"{field}.tool_use_id")
        if seen_other:
            problem = "tool_result blocks must come before any other block of the user turn"
            raise InvalidHistory(problem, index=index, field=field)
        if call_id in answered:
            raise InvalidHistory(f"second tool_result for {call_id!r}", index=index, field=f"{field}.tool_use_id")
        answered.add(call_id)
        content = block.get("content")
        if content is not None and not isinstance(content, str):
            expect_list(content, index, f"{field}.content")
    missing = [call_id for call_id in pending if call_id not in answered]
    if missing:
        _unanswered({missing[0]: pending[missing[0]]})


def _check_assistant(blocks: list[Mapping[str, Any]], index: int, used: set[str]) -> dict[str, int]:
    pending: dict[str, int] = {}
    first_other: int | None = None
    late_thinking: int | None = None
    for k, block in enumerate(blocks):
        field = f"content[{k}]"
        kind = block.get("type")
        if kind == "tool_result":
            problem = "an assistant turn cannot hold a tool_result block"
            raise InvalidHistory(problem, index=index, field=f"{field}.type")
        if kind in _THINKING:
            if first_other is not None and late_thinking is None:
                late_thinking = k
            continue
        if kind == _COMPACTION:
            continue  # the head of the turn (checked by _check_compaction), before its thinking
        if first_other is None:
            first_other = k
        if kind == "tool_use":
            call_id = expect_str(block.get("id"), index, f"{field}.id", nonempty=True)
            check_call_id(call_id, ANTHROPIC_IDS, index, f"{field}.id")
            expect_str(block.get("name"), index, f"{field}.name", nonempty=True)
            expect_mapping(block.get("input"), index, f"{field}.input")
            if call_id in used:
                problem = f"duplicate tool_use id {call_id!r} (each tool_use id may appear once in a request)"
                raise InvalidHistory(problem, index=index, field=f"{field}.id")
            used.add(call_id)
            pending[call_id] = index
    if pending and late_thinking is not None:
        problem = "thinking blocks must come first in an assistant turn that uses tools"
        raise InvalidHistory(problem, index=index, field=f"content[{late_thinking}]")
    return pending
