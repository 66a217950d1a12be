"""A recorded session as Anthropic Messages the API accepts, and what had to change for it (``convert --to anthropic``).

The codec (``formats/anthropic.py``) writes what a history holds, sendable or not, so that a conversion changes
nothing it need not. A recorded session is often not sendable as it is: an agent's crash leaves a call without its
result, a framework writes a system note mid-conversation, two assistant messages follow each other. The API refuses
(or silently combines) those; a converted file meant to be sent must not hold them. :func:`sendable` makes the
changes, each as small as the API allows, and names them:

- system and developer messages after the conversation started move to its head (the API takes the system prompt
  apart, before everything);
- blank text (a blank block, blank text beside tool calls) is dropped: the API refuses it and it says nothing;
- a call's arguments that are JSON but no object (``null``, ``"text"``, ``[1, 2]``: Chat takes them) become
  ``{"unparsed_arguments": <the text>}``, as the proxy sends a model's unreadable arguments (the API takes only an
  object as ``input``);
- the tool-call pairing is repaired as before every model call (:func:`contextfold.pairing.normalize`'s steps: a
  repeated call id, a result without its call, a result away from its call, a call without a result, an empty
  message, an opening that is not the user's);
- another provider's state (Responses reasoning, a compaction item) is dropped, and an item the API has no block
  for (a ``web_search_call``) is written as a placeholder text, as the codec does; both are named, as is an
  opening user turn the repair makes up;
- tool call ids the API refuses, and a call's id used again in a later call, are renamed (the codec does it,
  ``formats/_call_ids.py``);
- consecutive turns of one role are merged into one (their blocks in order; in a merged assistant turn that uses
  tools, thinking blocks first, as the API wants them);
- a final assistant turn's text loses its trailing whitespace (sent last, it is a prefill, which the API refuses
  ending in whitespace).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from ..errors import InvalidHistory
from ..formats import anthropic
from ..formats._call_ids import anthropic_call_id
from ..formats._common import placeholder
from ..formats.intake import UNPARSED_ARGUMENTS
from ..formats.opaque import kinds, unreadable
from ..messages import Message, TextPart, ToolCall
from ..pairing import (
    CONTINUATION_TEXT,
    drop_empty_messages,
    ensure_call_outputs_present,
    ensure_leading_user,
    move_outputs_after_calls,
    remove_duplicate_calls,
    remove_orphan_outputs,
)

__all__ = ["sendable"]

_APART = frozenset({"system", "developer"})
_THINKING = frozenset({"thinking", "redacted_thinking"})
_COMPACTION = "compaction"
# The encoder's text for a part Anthropic cannot carry (formats._common.placeholder), read back to name the change.
_PLACEHOLDER = re.compile(re.escape(placeholder("KIND part", anthropic.NAME)).replace("KIND", "(?P<kind>.+?)"))


def sendable(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[str]]:
    """Anthropic message dicts (the JSONL form: system items first) the API accepts, and each change made.

    Raises :class:`~contextfold.errors.InvalidHistory` if the result is still refused (a shape nothing here
    repairs), naming the session's message that makes it so (the index is ``messages``', not the output's: the
    changes move and merge messages) and the problem.
    """
    try:
        return _sendable(messages)
    except InvalidHistory as exc:
        raise _named_by_input(messages, exc) from None


def _named_by_input(messages: Sequence[Message], refused: InvalidHistory) -> InvalidHistory:
    """``refused`` naming the first message of ``messages`` whose prefix can no longer be sent.

    A prefix that can be sent stays so without the messages after it, so the first refused prefix is found by
    halving (a few conversions, on the error's path only).
    """
    low, high = 0, len(messages)  # messages[:low] is sent; messages[:high] is refused
    problem = refused
    while high - low > 1:
        middle = (low + high) // 2
        try:
            _sendable(messages[:middle])
        except InvalidHistory as exc:
            high, problem = middle, exc
        else:
            low = middle
    where = f"in the converted turn, {problem.field}: " if problem.field else ""
    return InvalidHistory(f"{where}{problem.problem}", index=high - 1, field=None)


def _sendable(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[str]]:
    changes: list[str] = []
    history = _system_first(list(messages), changes)
    history = _without_blank_text(history, changes)
    history = _arguments_as_objects(history, changes)
    history = _paired(history, changes)
    _count_unsendable_parts(history, changes)
    items = anthropic.encode(history)
    _count_placeholders(history, items, changes)
    _count_renamed_ids(history, changes)
    items = _merged(items, changes)
    items = _final_text_trimmed(items, changes)
    anthropic.validate(items)
    return items, changes


def _note(changes: list[str], count: int, one: str, many: str) -> None:
    if count:
        changes.append(one if count == 1 else many.format(count))


def _system_first(history: list[Message], changes: list[str]) -> list[Message]:
    started = next((i for i, m in enumerate(history) if m.role not in _APART), len(history))
    late = [m for m in history[started:] if m.role in _APART]
    _note(changes, len(late), "moved 1 system message to the head (the API takes the system prompt apart)",
          "moved {} system messages to the head (the API takes the system prompt apart)")
    if not late:
        return history
    return [*history[:started], *late, *(m for m in history[started:] if m.role not in _APART)]


def _blank(part: object) -> bool:
    return isinstance(part, TextPart) and not part.text.strip()


def _without_blank_text(history: list[Message], changes: list[str]) -> list[Message]:
    dropped = 0
    out: list[Message] = []
    for m in history:
        if isinstance(m.content, str):
            if m.tool_calls and m.content and not m.content.strip():
                dropped += 1
                m = replace(m, content="")
        elif any(map(_blank, m.content)):
            kept = tuple(p for p in m.content if not _blank(p))
            dropped += len(m.content) - len(kept)
            # (a message left with nothing is dropped below as empty; a tool result answers with "")
            m = replace(m, content=kept if kept or m.role != "tool" else "")
        out.append(m)
    _note(changes, dropped, "dropped 1 blank text block", "dropped {} blank text blocks")
    return out


def _arguments_as_objects(history: list[Message], changes: list[str]) -> list[Message]:
    wrapped = 0
    out: list[Message] = []
    for m in history:
        if m.tool_calls and not all(map(_object_arguments, m.tool_calls)):
            calls = tuple(c if _object_arguments(c) else
                          replace(c, arguments=json.dumps({UNPARSED_ARGUMENTS: c.arguments}, ensure_ascii=False))
                          for c in m.tool_calls)
            wrapped += sum(a is not b for a, b in zip(calls, m.tool_calls, strict=True))
            m = replace(m, tool_calls=calls)
        out.append(m)
    wrapping = f"as {{{UNPARSED_ARGUMENTS!r}: <the text>}} (the API takes only an object as a call's input)"
    _note(changes, wrapped, f"wrapped the arguments of 1 call that are not a JSON object {wrapping}",
          "wrapped the arguments of {} calls that are not a JSON object " + wrapping)
    return out


def _object_arguments(call: ToolCall) -> bool:
    try:
        return isinstance(call.parsed_arguments(), dict)
    except (ValueError, RecursionError):
        return False


def _paired(history: list[Message], changes: list[str]) -> list[Message]:
    calls_before = sum(len(m.tool_calls) for m in history)
    out = remove_duplicate_calls(history)
    _note(changes, calls_before - sum(len(m.tool_calls) for m in out), "dropped 1 call repeating an id in its turn",
          "dropped {} calls repeating an id in their turn")
    before = len(out)
    out = remove_orphan_outputs(out)
    _note(changes, before - len(out), "dropped 1 tool result that answers no call before it (or answers one twice)",
          "dropped {} tool results that answer no call before them (or answer one twice)")
    displaced = _displaced_results(out)
    out = move_outputs_after_calls(out)
    _note(changes, displaced, "moved 1 tool result right after its call",
          "moved {} tool results right after their calls")
    before = len(out)
    out = ensure_call_outputs_present(out)
    _note(changes, len(out) - before, "added an 'aborted' result for 1 call that had none",
          "added 'aborted' results for {} calls that had none")
    before = len(out)
    out = drop_empty_messages(out)
    _note(changes, before - len(out), "dropped 1 empty message", "dropped {} empty messages")
    before = len(out)
    out = ensure_leading_user(out)
    if len(out) > before:
        changes.append(f"opened the conversation with the user message {CONTINUATION_TEXT!r}, which the session "
                       "did not hold (the API wants the user first)")
    return out


def _displaced_results(history: list[Message]) -> int:
    """How many tool results are not in the run of results right after the assistant message that called them."""
    answering: set[str] = set()  # the call ids of the assistant message the current run of results follows
    displaced = 0
    for m in history:
        if m.role == "tool":
            displaced += m.tool_call_id not in answering
        else:
            answering = {c.id for c in m.tool_calls} if m.role == "assistant" else set()
    return displaced


def _count_unsendable_parts(history: list[Message], changes: list[str]) -> None:
    """Name the parts the encoder drops: another provider's state (reasoning, compaction) Anthropic cannot read."""
    dropped = kinds(unreadable(history, anthropic.NAME))
    for kind, count in sorted(dropped.items()):
        changes.append(f"dropped {count} {kind} part{'s' if count > 1 else ''} (another provider's state, which "
                       "the API cannot read)")


def _count_placeholders(history: list[Message], items: list[dict[str, Any]], changes: list[str]) -> None:
    """Name the parts written as a placeholder text ('[web_search_call part not representable in anthropic]')."""
    def found(texts: Iterable[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for text in texts:
            if (match := _PLACEHOLDER.fullmatch(text)) is not None:
                counts[match["kind"]] = counts.get(match["kind"], 0) + 1
        return counts

    written = found(b["text"] for item in items if isinstance(item["content"], list) for b in item["content"]
                    if b.get("type") == "text")
    # (a text the session held already spelled like one is no change)
    held = found(p.text for m in history if not isinstance(m.content, str) for p in m.content
                 if isinstance(p, TextPart))
    for kind, count in sorted(written.items()):
        if (new := count - held.get(kind, 0)) > 0:
            changes.append(f"wrote {new} {kind} part{'s' if new > 1 else ''} the API cannot carry as a placeholder "
                           "text")


def _count_renamed_ids(history: list[Message], changes: list[str]) -> None:
    ids = [c.id for m in history for c in m.tool_calls]
    refused = {call_id for call_id in ids if anthropic_call_id(call_id) != call_id}
    _note(changes, len(refused), "renamed 1 tool call id the API refuses (letters, digits, '_' and '-' only)",
          "renamed {} tool call ids the API refuses (letters, digits, '_' and '-' only)")
    _note(changes, len(ids) - len(set(ids)), "renamed 1 call reusing an earlier call's id (the API takes each id once)",
          "renamed {} calls reusing an earlier call's id (the API takes each id once)")


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def _merged(items: list[dict[str, Any]], changes: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    merged = 0
    for item in items:
        previous = out[-1] if out else None
        if previous is None or item["role"] in _APART or item["role"] != previous["role"]:
            out.append(item)
            continue
        merged += 1
        turn = {**item, **previous, "content": _blocks(previous["content"]) + _blocks(item["content"])}
        out[-1] = _blocks_in_order(turn)
    _note(changes, merged, "merged 1 turn into the turn of the same role before it (the API wants roles to "
          "alternate)", "merged {} turns into the turn of the same role before them (the API wants roles to alternate)")
    return out


def _blocks_in_order(turn: dict[str, Any]) -> dict[str, Any]:
    """A merged turn with its blocks where the API wants them, otherwise in the order they came.

    Results first in a user turn; thinking first in an assistant turn that uses tools.
    """
    blocks = turn["content"]
    if turn["role"] == "user":
        first = [b for b in blocks if b.get("type") == "tool_result"]
    elif any(b.get("type") == "tool_use" for b in blocks):
        # (a compaction block heads the turn it is in, before the thinking)
        first = [b for b in blocks if b.get("type") == _COMPACTION]
        first += [b for b in blocks if b.get("type") in _THINKING]
    else:
        return turn
    moved = {id(b) for b in first}
    return {**turn, "content": [*first, *(b for b in blocks if id(b) not in moved)]}


def _final_text_trimmed(items: list[dict[str, Any]], changes: list[str]) -> list[dict[str, Any]]:
    if not items or items[-1]["role"] != "assistant":
        return items
    last = items[-1]
    content = last["content"]
    if isinstance(content, str):
        if content == content.rstrip():
            return items
        trimmed: Any = content.rstrip()
    else:
        block = content[-1] if content else None
        if not isinstance(block, dict) or block.get("type") != "text" or block["text"] == block["text"].rstrip():
            return items
        trimmed = [*content[:-1], {**block, "text": block["text"].rstrip()}]
    changes.append("trimmed the trailing whitespace of the final assistant turn (the API refuses it there)")
    return [*items[:-1], {**last, "content": trimmed}]
