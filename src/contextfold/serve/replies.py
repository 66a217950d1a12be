"""A streamed reply put back together as it passes: its usage, its id and its items (the caller's view of it).

The proxy forwards every event untouched as it arrives and lets a :class:`ReplyCollector` read it on the way: the
usage is recorded in the session when the stream ends, and the reply's items are what a Responses continuation or
a retrieval round feeds the session.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .apis import ApiName, reply_items

__all__ = ["ReplyCollector"]


class ReplyCollector:
    """Reads the events of one API's stream (their JSON data) and keeps the reply they add up to."""

    def __init__(self, api: ApiName) -> None:
        self.api = api
        self.usage: dict[str, Any] | None = None
        self.response_id: str | None = None
        self.finished = False
        # An event of a shape the collector could not read (a tool-call delta with "index": null, a "function"
        # that is a string): the event still reaches the client, but what was collected is not the reply.
        self.unreadable = False
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._response: Mapping[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._partial: dict[int, list[str]] = {}

    def observe(self, data: Any) -> None:
        """Take one event's JSON data into account."""
        if not isinstance(data, Mapping):
            return
        try:
            if self.api == "chat":
                self._chat(data)
            elif self.api == "responses":
                self._responses(data)
            else:
                self._messages(data)
        except (TypeError, ValueError, AttributeError):  # (the proxy reads what it relays; it never breaks it)
            self.unreadable = True

    # -- Chat Completions -------------------------------------------------------------------------------------
    def _chat(self, chunk: Mapping[str, Any]) -> None:
        if isinstance(chunk.get("id"), str):
            self.response_id = chunk["id"]
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = dict(chunk["usage"])
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self._text.append(delta["content"])
            if isinstance(delta.get("refusal"), str):
                self._refusal.append(delta["refusal"])
            for call in delta.get("tool_calls") or ():
                slot = self._calls.setdefault(int(call.get("index", 0)), {"id": None, "name": "", "arguments": []})
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["name"] += function.get("name") or ""
                slot["arguments"].append(function.get("arguments") or "")
            if choice.get("finish_reason"):
                self.finished = True

    # -- Responses --------------------------------------------------------------------------------------------
    def _responses(self, event: Mapping[str, Any]) -> None:
        response = event.get("response")
        if isinstance(response, Mapping):
            if isinstance(response.get("id"), str):
                self.response_id = response["id"]
            if event.get("type") in ("response.completed", "response.incomplete", "response.failed"):
                self._response = response
                self.finished = True
                if isinstance(response.get("usage"), Mapping):
                    self.usage = dict(response["usage"])

    # -- Anthropic Messages -----------------------------------------------------------------------------------
    def _messages(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), Mapping):
            message = event["message"]
            self.response_id = message.get("id")
            if isinstance(message.get("usage"), Mapping):
                self.usage = dict(message["usage"])
        elif kind == "content_block_start" and isinstance(event.get("content_block"), Mapping):
            self._blocks[int(event.get("index", 0))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), Mapping):
            index, delta = int(event.get("index", 0)), event["delta"]
            block = self._blocks.setdefault(index, {"type": "text", "text": ""})
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                self._partial.setdefault(index, []).append(str(delta.get("partial_json", "")))
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif delta.get("type") == "signature_delta":
                block["signature"] = str(delta.get("signature", ""))
        elif kind == "message_delta":
            if isinstance(event.get("usage"), Mapping):
                self.usage = {**(self.usage or {}), **{k: v for k, v in event["usage"].items() if v is not None}}
        elif kind == "message_stop":
            self.finished = True

    # -- the reply --------------------------------------------------------------------------------------------
    def items(self) -> list[dict[str, Any]]:
        """The reply as the API's conversation items (what the caller appends to its history)."""
        if self.api == "responses":
            return reply_items("responses", self._response) if self._response is not None else []
        if self.api == "chat":
            message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
            if self._refusal:
                message["refusal"] = "".join(self._refusal)
            if self._calls:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"],
                                                                     "arguments": "".join(c["arguments"])}}
                    for _, c in sorted(self._calls.items())]
            return reply_items("chat", {"choices": [{"message": message}]})
        blocks: list[dict[str, Any]] = []
        for index, block in sorted(self._blocks.items()):
            if block.get("type") == "tool_use":
                text = "".join(self._partial.get(index, ()))
                try:
                    block = {**block, "input": json.loads(text) if text else block.get("input", {})}
                except ValueError:
                    block = {**block, "input": {}}
            blocks.append(block)
        return reply_items("messages", {"content": blocks})
