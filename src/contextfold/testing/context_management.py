"""The providers' own context management, as the scripted server plays it: what it sends and what it rejects.

Anthropic Messages (``anthropic-beta: context-management-2025-06-27``, ``compact-2026-01-12``): the edits of
``context_management`` (``clear_thinking_20251015``, ``clear_tool_uses_20250919``, ``compact_20260112``) are
applied to the request before the model reads it, reported in ``context_management.applied_edits``; a compaction
puts a ``compaction`` block at the head of the reply (alone, with ``stop_reason: "compaction"``, under
``pause_after_compaction``) and a ``compaction`` entry in ``usage.iterations``. OpenAI Responses:
``context_management: [{"type": "compaction", "compact_threshold": N}]`` puts a ``compaction`` item (opaque
``encrypted_content``) at the head of the output, and ``POST /responses/compact`` returns the user messages and one
compaction item. Thinking blocks and reasoning items are signed by the server (an HMAC of their content).

Rejected as the providers reject them: an unknown edit type or malformed edit; ``clear_thinking`` not first, or
without thinking on; a compaction trigger under 50,000 tokens; edits or compaction blocks without their beta; a
thinking block, redacted block, compaction block or item, or reasoning item the server did not issue as it is (a
changed byte); a compaction block that is not the first block of the conversation; a tool-use turn whose thinking
block was removed while thinking is on; a function call or message sent without the reasoning item it was issued
with. Every compaction records what it replaced, so a test can check that nothing replaced is sent again
(:meth:`ContextManagement.resent`).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..tokens import TokenCounter
from .wire import API, ErrorReply, Reply

__all__ = ["MIN_COMPACT_TRIGGER", "Admitted", "CompactionRecord", "ContextManagement"]

CONTEXT_BETA = "context-management-2025-06-27"
COMPACT_BETA = "compact-2026-01-12"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
COMPACT = "compact_20260112"
_EDITS = frozenset({CLEAR_TOOL_USES, CLEAR_THINKING, COMPACT})
# Anthropic's floor for the compaction trigger (its documented minimum).
MIN_COMPACT_TRIGGER = 50_000
# Anthropic's default compaction trigger, and the defaults of clear_tool_uses (trigger and tool uses kept).
DEFAULT_COMPACT_TRIGGER = 150_000
DEFAULT_CLEAR_TRIGGER = 100_000
DEFAULT_KEEP_TOOL_USES = 3
# What a cleared tool result reads as (Anthropic replaces it with a short note; its wording is not documented).
CLEARED_NOTE = "[tool result cleared to save context]"
_THINKING = frozenset({"thinking", "redacted_thinking"})
_STANDING = frozenset({"system", "developer"})


class Rejected(Exception):
    """A request the provider would refuse: the message, and Anthropic's ``error_code`` when it has one."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class CompactionRecord:
    """One compaction the server made: where, the item it returned, and what that item replaced."""

    request: int
    api: str
    item: dict[str, Any]
    replaced: tuple[str, ...]
    tokens_before: int
    tokens_after: int


@dataclass(slots=True)
class Admitted:
    """What the emulation decided for one admitted request: the tokens the model reads and what to add to the reply."""

    api: API
    input_tokens: int
    thinking: bool = False
    applied_edits: list[dict[str, Any]] = field(default_factory=list)
    compaction: dict[str, Any] | None = None
    compaction_usage: tuple[int, int] | None = None
    pause: bool = False
    managed: bool = False


def _canonical(item: Any) -> str:
    return json.dumps(item, sort_keys=True, ensure_ascii=False)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key not in ("type", "role", "cache_control", "id", "call_id", "tool_call_id", "tool_use_id",
                           "signature", "encrypted_content", "status"):
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _betas(headers: Mapping[str, str]) -> set[str]:
    return {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}


def _thinking_on(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")


class ContextManagement:
    """The server side of context management for one :class:`~contextfold.testing.ScriptedLLMServer`."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._key = os.urandom(32)
        self._lock = threading.Lock()
        self.compactions: list[CompactionRecord] = []
        self._thinking_calls: set[str] = set()  # tool_use ids issued after a thinking block
        self._reasoned: dict[str, str] = {}  # Responses item id -> the reasoning item id it was issued after
        self._summaries: dict[str, int] = {}  # compaction token -> tokens of the summary it stands for
        self._serial = 0

    # -- signing ------------------------------------------------------------------------------------------------
    def _sign(self, kind: str, payload: str) -> str:
        mac = hmac.new(self._key, f"{kind}\x00{payload}".encode(), hashlib.sha256).digest()
        return base64.b64encode(mac).decode()

    def _valid(self, kind: str, payload: str, token: Any) -> bool:
        return isinstance(token, str) and hmac.compare_digest(token, self._sign(kind, payload))

    def _next(self) -> int:
        with self._lock:
            self._serial += 1
            return self._serial

    def _tokens(self, value: Any) -> int:
        return sum(self.counter.count(s) for s in _strings(value))

    # -- admitting a request --------------------------------------------------------------------------------------
    def admit(self, api: API, body: Mapping[str, Any], headers: Mapping[str, str], input_tokens: int,
              number: int) -> Admitted | ErrorReply:
        """Check a request as the provider would, and apply its context management (edits, compaction)."""
        try:
            if api == "messages":
                return self._admit_messages(body, headers, input_tokens, number)
            if api == "responses":
                return self._admit_responses(body, input_tokens, number)
        except Rejected as exc:
            return ErrorReply("invalid_request", str(exc), code=exc.code)
        return Admitted(api, input_tokens)

    def _admit_messages(self, body: Mapping[str, Any], headers: Mapping[str, str], input_tokens: int,
                        number: int) -> Admitted:
        betas = _betas(headers)
        messages = [m for m in body.get("messages") or () if isinstance(m, Mapping)]
        thinking = _thinking_on(body)
        self._check_anthropic_items(messages, betas, thinking)
        edits = self._anthropic_edits(body.get("context_management"), betas, thinking)
        admitted = Admitted("messages", input_tokens, thinking=thinking, managed=bool(edits))
        work: list[dict[str, Any]] = [dict(m) for m in copy.deepcopy(messages)]
        for edit in edits:
            if edit["type"] == CLEAR_THINKING:
                self._clear_thinking(work, edit, admitted)
            elif edit["type"] == CLEAR_TOOL_USES:
                self._clear_tool_uses(work, edit, admitted)
        compact = next((e for e in edits if e["type"] == COMPACT), None)
        if compact is not None:
            trigger = compact.get("trigger") or {"type": "input_tokens", "value": DEFAULT_COMPACT_TRIGGER}
            if admitted.input_tokens > trigger["value"]:
                summary = self._summary(messages, compact.get("instructions"))
                token = self._sign("compaction", summary)
                block = {"type": "compaction", "content": summary, "encrypted_content": token}
                after = self.counter.count(summary) + self._tokens(body.get("system")) + self._tokens(
                    body.get("tools"))
                self._record(number, "messages", block, self._anthropic_replaced(messages), admitted.input_tokens,
                             after)
                admitted.compaction = block
                admitted.compaction_usage = (admitted.input_tokens, self.counter.count(summary))
                admitted.input_tokens = after
                admitted.pause = bool(compact.get("pause_after_compaction"))
        return admitted

    def _anthropic_edits(self, management: Any, betas: set[str], thinking: bool) -> list[Mapping[str, Any]]:
        if management is None:
            return []
        if CONTEXT_BETA not in betas:
            raise Rejected(f"context_management: requires the anthropic-beta header {CONTEXT_BETA!r}")
        if not isinstance(management, Mapping) or not isinstance(management.get("edits"), list):
            raise Rejected("context_management.edits: Field required (a list of edits)")
        edits = management["edits"]
        for k, edit in enumerate(edits):
            where = f"context_management.edits.{k}"
            kind = edit.get("type") if isinstance(edit, Mapping) else None
            if kind not in _EDITS:
                raise Rejected(f"{where}.type: Input tag {kind!r} found using 'type' does not match any of the "
                               f"expected tags: {', '.join(sorted(repr(e) for e in _EDITS))}")
            if kind == CLEAR_THINKING:
                if k != 0:
                    raise Rejected(f"{where}: {CLEAR_THINKING} must be the first edit")
                if not thinking:
                    raise Rejected(f"{where}: {CLEAR_THINKING} requires thinking to be enabled")
                keep = edit.get("keep", {"type": "thinking_turns", "value": 1})
                if keep != "all" and not (isinstance(keep, Mapping) and keep.get("type") in ("thinking_turns", "all")
                                          and (keep.get("type") == "all" or _positive(keep.get("value")))):
                    raise Rejected(f"{where}.keep: expected 'all' or {{'type': 'thinking_turns', 'value': >= 1}}")
            elif kind == CLEAR_TOOL_USES:
                _check_threshold(edit.get("trigger"), f"{where}.trigger", ("input_tokens", "tool_uses"))
                _check_threshold(edit.get("keep"), f"{where}.keep", ("tool_uses",), zero=True)
                _check_threshold(edit.get("clear_at_least"), f"{where}.clear_at_least", ("input_tokens",), zero=True)
                excluded = edit.get("exclude_tools")
                if excluded is not None and not (isinstance(excluded, list)
                                                 and all(isinstance(t, str) for t in excluded)):
                    raise Rejected(f"{where}.exclude_tools: expected a list of tool names")
            else:
                if COMPACT_BETA not in betas:
                    raise Rejected(f"{where}: {COMPACT} requires the anthropic-beta header {COMPACT_BETA!r}")
                trigger = edit.get("trigger")
                _check_threshold(trigger, f"{where}.trigger", ("input_tokens",))
                if isinstance(trigger, Mapping) and trigger["value"] < MIN_COMPACT_TRIGGER:
                    raise Rejected(f"{where}.trigger.value: must be at least {MIN_COMPACT_TRIGGER}")
                instructions = edit.get("instructions")
                if instructions is not None and not isinstance(instructions, str):
                    raise Rejected(f"{where}.instructions: expected a string")
        return [e for e in edits if isinstance(e, Mapping)]

    def _check_anthropic_items(self, messages: Sequence[Mapping[str, Any]], betas: set[str], thinking: bool) -> None:
        for index, message in enumerate(messages):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for k, block in enumerate(content):
                if not isinstance(block, Mapping):
                    continue
                where = f"messages.{index}.content.{k}"
                kind = block.get("type")
                if kind == "thinking" and not self._valid("thinking", str(block.get("thinking")),
                                                          block.get("signature")):
                    raise Rejected(f"{where}: Invalid `signature` in `thinking` block")
                if kind == "redacted_thinking" and not self._valid("redacted", "", _redacted_mac(block)):
                    raise Rejected(f"{where}: Invalid `data` in `redacted_thinking` block")
                if kind == "compaction":
                    if COMPACT_BETA not in betas:
                        raise Rejected(f"{where}: compaction blocks require the anthropic-beta header "
                                       f"{COMPACT_BETA!r}")
                    summary = block.get("content")
                    if summary is not None and not self._valid("compaction", str(summary),
                                                               block.get("encrypted_content")):
                        raise Rejected(f"{where}: the compaction block's content differs from the text it was "
                                       "returned with", code="compaction_content_mismatch")
        if thinking and messages:
            self._check_thinking_kept(messages)

    def _check_thinking_kept(self, messages: Sequence[Mapping[str, Any]]) -> None:
        # The last assistant turn whose calls are being answered must still open with the thinking it came with.
        last = messages[-1]
        if last.get("role") != "user" or len(messages) < 2:
            return
        results = [b for b in last.get("content") or () if isinstance(b, Mapping) and b.get("type") == "tool_result"]
        turn = messages[-2]
        blocks = [b for b in turn.get("content") or () if isinstance(b, Mapping)] if turn.get(
            "role") == "assistant" and isinstance(turn.get("content"), list) else []
        uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        if not results or not uses or not any(u in self._thinking_calls for u in uses):
            return
        head = next((b for b in blocks if b.get("type") != "compaction"), None)
        if head is None or head.get("type") not in _THINKING:
            index = len(messages) - 2
            raise Rejected(f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                           f"{(head or {}).get('type')!r}. When `thinking` is enabled, a final `assistant` message "
                           "must start with a thinking block (before its `tool_use` blocks); keep the thinking "
                           "blocks of the turn in a tool loop, or disable `thinking`")

    def _clear_thinking(self, messages: list[dict[str, Any]], edit: Mapping[str, Any], admitted: Admitted) -> None:
        keep = edit.get("keep", {"type": "thinking_turns", "value": 1})
        if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
            return
        turns = [m for m in messages if m.get("role") == "assistant" and isinstance(m.get("content"), list)
                 and any(isinstance(b, Mapping) and b.get("type") in _THINKING for b in m["content"])]
        cleared_turns = cleared_tokens = 0
        for turn in turns[: max(0, len(turns) - int(keep["value"]))]:
            gone = [b for b in turn["content"] if isinstance(b, Mapping) and b.get("type") in _THINKING]
            cleared_tokens += self._tokens(gone)
            turn["content"] = [b for b in turn["content"] if b not in gone]
            cleared_turns += 1
        if cleared_turns:
            admitted.input_tokens -= cleared_tokens
            admitted.applied_edits.append({"type": CLEAR_THINKING, "cleared_thinking_turns": cleared_turns,
                                           "cleared_input_tokens": cleared_tokens})

    def _clear_tool_uses(self, messages: list[dict[str, Any]], edit: Mapping[str, Any], admitted: Admitted) -> None:
        trigger = edit.get("trigger") or {"type": "input_tokens", "value": DEFAULT_CLEAR_TRIGGER}
        uses: list[tuple[dict[str, Any], str]] = []  # (tool_use block, tool name) in order
        results: dict[str, dict[str, Any]] = {}
        for m in messages:
            for block in m.get("content") or () if isinstance(m.get("content"), list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    uses.append((block, str(block.get("name"))))
                elif isinstance(block, dict) and block.get("type") == "tool_result":
                    results[str(block.get("tool_use_id"))] = block
        measure = admitted.input_tokens if trigger["type"] == "input_tokens" else len(uses)
        if measure <= trigger["value"]:
            return
        keep = (edit.get("keep") or {"value": DEFAULT_KEEP_TOOL_USES})["value"]
        excluded = set(edit.get("exclude_tools") or ())
        inputs = edit.get("clear_tool_inputs") or False
        candidates = [(u, name) for u, name in uses[: max(0, len(uses) - keep)] if name not in excluded]
        cleared_tokens = 0
        cleared: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        for use, name in candidates:
            found = results.get(str(use.get("id")))
            if found is None or found.get("content") == CLEARED_NOTE:
                continue
            cleared_tokens += self._tokens(found.get("content")) - self.counter.count(CLEARED_NOTE)
            if inputs is True or (isinstance(inputs, list) and name in inputs):
                cleared_tokens += self._tokens(use.get("input"))
                cleared.append((found, use))
            else:
                cleared.append((found, None))
        least = (edit.get("clear_at_least") or {"value": 0})["value"]
        if not cleared or cleared_tokens < least:
            return
        for block, use_block in cleared:
            block["content"] = CLEARED_NOTE
            if use_block is not None:
                use_block["input"] = {}
        admitted.input_tokens -= cleared_tokens
        admitted.applied_edits.append({"type": CLEAR_TOOL_USES, "cleared_tool_uses": len(cleared),
                                       "cleared_input_tokens": cleared_tokens})

    # -- Responses ------------------------------------------------------------------------------------------------
    def _admit_responses(self, body: Mapping[str, Any], input_tokens: int, number: int) -> Admitted:
        raw = body.get("input")
        items = [i for i in raw if isinstance(i, Mapping)] if isinstance(raw, list) else []
        self._check_responses_items(items, store=body.get("store") is not False)
        input_tokens += sum(self._summaries.get(str(i.get("encrypted_content")), 0) for i in items
                            if i.get("type") == "compaction")
        admitted = Admitted("responses", input_tokens)
        management = body.get("context_management")
        if management is None:
            return admitted
        if not isinstance(management, list):
            raise Rejected("context_management: expected an array of entries")
        threshold = None
        for k, entry in enumerate(management):
            kind = entry.get("type") if isinstance(entry, Mapping) else None
            if kind != "compaction":
                raise Rejected(f"Invalid value: {kind!r}. Supported values are: 'compaction'. "
                               f"(context_management[{k}].type)")
            value = entry.get("compact_threshold")
            if value is not None and not _positive(value):
                raise Rejected(f"context_management[{k}].compact_threshold: expected a positive integer")
            threshold = value
        admitted.managed = True
        if threshold is not None and admitted.input_tokens > threshold:
            admitted.compaction = self._openai_compaction(items, number, admitted.input_tokens)
            admitted.input_tokens = self._record_tokens(admitted.compaction) + self._tokens(body.get("instructions"))
        return admitted

    def _openai_compaction(self, items: Sequence[Mapping[str, Any]], number: int, before: int) -> dict[str, Any]:
        summary = self._summary(items, None)
        serial = self._next()
        token = f"cmp.{serial}." + self._sign("compaction", f"openai:{serial}")
        self._summaries[token] = self.counter.count(summary)
        item = {"type": "compaction", "id": f"cmp_scripted_{serial}", "encrypted_content": token}
        replaced = tuple(_canonical(i) for i in items if i.get("role") not in _STANDING)
        self._record(number, "responses", item, replaced, before, self._summaries[token])
        return item

    def _record_tokens(self, item: Mapping[str, Any]) -> int:
        return self._summaries.get(str(item.get("encrypted_content")), 0)

    def _check_responses_items(self, items: Sequence[Mapping[str, Any]], *, store: bool) -> None:
        for index, item in enumerate(items):
            kind = item.get("type", "message")
            where = f"input[{index}]"
            if kind == "compaction":
                token = item.get("encrypted_content")
                serial = str(token).split(".")[1] if str(token).count(".") >= 2 else ""
                if not self._valid("compaction", f"openai:{serial}", str(token).rsplit(".", 1)[-1]) or not str(
                        token).startswith(f"cmp.{serial}."):
                    raise Rejected(f"{where}: The encrypted content of item {item.get('id')!r} could not be "
                                   "verified.")
            elif kind == "reasoning":
                encrypted = item.get("encrypted_content")
                if encrypted is None and not store:
                    raise Rejected(f"Item with id {item.get('id')!r} not found. Items are not persisted when "
                                   "`store` is set to false. Try again with `store` set to true, or remove this "
                                   "item from your input.")
                if encrypted is not None and not self._valid("reasoning", str(item.get("id")), encrypted):
                    raise Rejected(f"{where}: The encrypted content for item {item.get('id')!r} could not be "
                                   "verified.")
            elif isinstance(item.get("id"), str) and item["id"] in self._reasoned:
                wanted = self._reasoned[item["id"]]
                if not self._follows_reasoning(items, index, wanted):
                    raise Rejected(f"Item {item['id']!r} of type {kind!r} was provided without its required "
                                   f"'reasoning' item: {wanted!r}.")

    @staticmethod
    def _follows_reasoning(items: Sequence[Mapping[str, Any]], index: int, wanted: str) -> bool:
        # The reasoning item sits before the outputs it produced, with only outputs of the same turn in between.
        for k in range(index - 1, -1, -1):
            item = items[k]
            if item.get("type") == "reasoning":
                return item.get("id") == wanted
            if item.get("type") not in ("message", "function_call") or item.get("role", "assistant") != "assistant":
                return False
        return False

    def compact_endpoint(self, body: Mapping[str, Any], number: int) -> dict[str, Any]:
        """The body of ``POST /responses/compact``: every user message of the input, then one compaction item."""
        raw = body.get("input")
        items = [i for i in raw if isinstance(i, Mapping)] if isinstance(raw, list) else (
            [{"role": "user", "content": raw}] if isinstance(raw, str) else [])
        self._check_responses_items(items, store=body.get("store") is not False)
        before = self._tokens(items)
        summary = self._summary(items, body.get("instructions"))
        serial = self._next()
        users = [_user_item(i, f"msg_cmp_{serial}_{k}") for k, i in enumerate(items)
                 if i.get("role") == "user" and i.get("type", "message") == "message"]
        token = f"cmp.{serial}." + self._sign("compaction", f"openai:{serial}")
        self._summaries[token] = self.counter.count(summary)
        item = {"type": "compaction", "id": f"cmp_scripted_{serial}", "encrypted_content": token}
        replaced = tuple(_canonical(i) for i in items if i.get("role") not in _STANDING and i.get("role") != "user")
        self._record(number, "responses_compact", item, replaced, before, self._summaries[token])
        output = [*users, item]
        usage = {"input_tokens": before, "output_tokens": self._summaries[token],
                 "total_tokens": before + self._summaries[token],
                 "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}}
        return {"id": f"resp_compact_{number}", "object": "response.compaction", "created_at": 1_700_000_000 + number,
                "output": output, "usage": usage}

    # -- the reply ------------------------------------------------------------------------------------------------
    def finish(self, admitted: Admitted, payload: dict[str, Any], reply: Reply) -> dict[str, Any]:
        """``payload`` (the reply body) with the reasoning, the compaction and the report of ``admitted`` added."""
        if admitted.api == "messages":
            return self._finish_messages(admitted, payload, reply)
        if admitted.api == "responses":
            return self._finish_responses(admitted, payload, reply)
        return payload

    def _finish_messages(self, admitted: Admitted, payload: dict[str, Any], reply: Reply) -> dict[str, Any]:
        blocks: list[dict[str, Any]] = list(payload.get("content") or ())
        if admitted.thinking and reply.reasoning:
            thought = {"type": "thinking", "thinking": reply.reasoning,
                       "signature": self._sign("thinking", reply.reasoning)}
            blocks.insert(0, thought)
            with self._lock:
                self._thinking_calls.update(str(b["id"]) for b in blocks if b.get("type") == "tool_use")
        usage = dict(payload.get("usage") or {})
        if admitted.compaction is not None:
            if admitted.pause:
                blocks = []
                payload["stop_reason"] = "compaction"
                usage["output_tokens"] = 0
            blocks.insert(0, dict(admitted.compaction))
            assert admitted.compaction_usage is not None
            c_in, c_out = admitted.compaction_usage
            usage["input_tokens"] = admitted.input_tokens
            usage["iterations"] = [
                {"type": "compaction", "input_tokens": c_in, "output_tokens": c_out, "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0},
                {"type": "message", "input_tokens": admitted.input_tokens, "output_tokens": usage.get(
                    "output_tokens", 0), "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
            ]
        else:
            usage["input_tokens"] = admitted.input_tokens
        payload["content"] = blocks
        payload["usage"] = usage
        if admitted.managed:
            payload["context_management"] = {"applied_edits": list(admitted.applied_edits)}
        return payload

    def _finish_responses(self, admitted: Admitted, payload: dict[str, Any], reply: Reply) -> dict[str, Any]:
        output: list[dict[str, Any]] = list(payload.get("output") or ())
        if reply.reasoning:
            serial = self._next()
            rs_id = f"rs_scripted_{serial}"
            reasoning = {"type": "reasoning", "id": rs_id,
                         "summary": [{"type": "summary_text", "text": reply.reasoning}],
                         "encrypted_content": self._sign("reasoning", rs_id)}
            with self._lock:
                self._reasoned.update((str(item["id"]), rs_id) for item in output if item.get("id"))
            output.insert(0, reasoning)
        if admitted.compaction is not None:
            output.insert(0, dict(admitted.compaction))
        payload["output"] = output
        usage = dict(payload.get("usage") or {})
        output_tokens = int(usage.get("output_tokens", 0))
        usage.update(input_tokens=admitted.input_tokens, total_tokens=admitted.input_tokens + output_tokens)
        details = dict(usage.get("input_tokens_details") or {})
        details.setdefault("cache_write_tokens", 0)
        usage["input_tokens_details"] = details
        payload["usage"] = usage
        return payload

    # -- bookkeeping ----------------------------------------------------------------------------------------------
    def _summary(self, items: Sequence[Mapping[str, Any]], instructions: Any) -> str:
        texts = " ".join(s for item in items for s in _strings(item))
        focus = f" Focus: {instructions}." if isinstance(instructions, str) and instructions.strip() else ""
        return (f"Summary by the scripted server of {len(items)} earlier items ({len(texts):,} characters)."
                f"{focus} The work so far: {texts[:160]}")

    def _record(self, number: int, api: str, item: dict[str, Any], replaced: tuple[str, ...], before: int,
                after: int) -> None:
        with self._lock:
            self.compactions.append(CompactionRecord(number, api, dict(item), replaced, before, after))

    @staticmethod
    def _anthropic_replaced(messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        out: list[str] = []
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                out.append(_canonical({"role": message.get("role"), "text": content}))
            elif isinstance(content, list):
                out.extend(_canonical(b) for b in content if isinstance(b, Mapping) and b.get("type") != "compaction")
        return tuple(out)

    def resent(self, requests: Sequence[Any]) -> list[tuple[int, str]]:
        """(request number, item) for every item a compaction replaced that a later request sent again."""
        found: list[tuple[int, str]] = []
        for record in self.compactions:
            replaced = set(record.replaced)
            for request in requests:
                if request.number <= record.request or request.path.endswith("/compact"):
                    continue
                for item in _request_units(request.api, request.body):
                    if item in replaced:
                        found.append((request.number, item))
        return found


def _request_units(api: str, body: Mapping[str, Any]) -> list[str]:
    if api == "responses":
        raw = body.get("input")
        return [_canonical(i) for i in raw if isinstance(i, Mapping)] if isinstance(raw, list) else []
    return list(ContextManagement._anthropic_replaced([m for m in body.get("messages") or ()
                                                      if isinstance(m, Mapping)]))


def _user_item(item: Mapping[str, Any], item_id: str) -> dict[str, Any]:
    """A user message of the input as the compact endpoint returns it: a typed item with an id."""
    content = item.get("content")
    parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else list(content or ())
    return {"type": "message", "id": item_id, "role": "user", "status": "completed", "content": parts}


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_threshold(value: Any, where: str, kinds: tuple[str, ...], *, zero: bool = False) -> None:
    if value is None:
        return
    ok = isinstance(value, Mapping) and value.get("type") in kinds and isinstance(value.get("value"), int) and (
        value["value"] >= (0 if zero else 1))
    if not ok:
        raise Rejected(f"{where}: expected {{'type': {' or '.join(repr(k) for k in kinds)}, 'value': <tokens>}}")


def _redacted_mac(block: Mapping[str, Any]) -> Any:
    data = block.get("data")
    return data.split(".", 1)[1] if isinstance(data, str) and "." in data else None
