"""A scripted reply as each API streams it: the server-sent events of Chat Completions, Responses and Messages.

The scripted server computes a reply body as for a plain request, then :func:`stream_events` cuts it into the
events the provider would send (text in small pieces, tool-call arguments in pieces), so that the SDKs' stream
readers put it back together into the very same reply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .wire import API

__all__ = ["stream_events"]

# Characters of text (or of tool-call arguments) per delta event: several events even for a short reply.
PIECE_CHARS = 12


def _pieces(text: str) -> list[str]:
    return [text[i:i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)] or []


def _sse(data: Any, name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def stream_events(api: API, body: Mapping[str, Any], request: Mapping[str, Any]) -> list[bytes]:
    """The events that stream ``body`` (a reply body of ``api``) for ``request``; the first one is the opening."""
    if api == "chat":
        return _chat(body, request)
    if api == "responses":
        return _responses(body)
    return _messages(body)


def _chat(body: Mapping[str, Any], request: Mapping[str, Any]) -> list[bytes]:
    options = request.get("stream_options")
    with_usage = isinstance(options, Mapping) and options.get("include_usage") is True
    head = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"],
            "system_fingerprint": body.get("system_fingerprint")}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data: dict[str, Any] = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                    "finish_reason": finish}]}
        if with_usage:
            data["usage"] = None
        return _sse(data)

    choice = body["choices"][0]
    message = choice["message"]
    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"content": piece}) for piece in _pieces(message.get("content") or "")]
    out += [chunk({"refusal": piece}) for piece in _pieces(message.get("refusal") or "")]
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call["function"]
        out.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                          "function": {"name": function["name"], "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _pieces(function["arguments"])]
    out.append(chunk({}, choice["finish_reason"]))
    if with_usage:
        out.append(_sse({**head, "choices": [], "usage": body["usage"]}))
    out.append(b"data: [DONE]\n\n")
    return out


def _responses(body: Mapping[str, Any]) -> list[bytes]:
    out: list[bytes] = []
    sequence = 0

    def event(kind: str, **fields: Any) -> None:
        nonlocal sequence
        out.append(_sse({"type": kind, "sequence_number": sequence, **fields}, kind))
        sequence += 1

    opening = {**body, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    event("response.created", response=opening)
    event("response.in_progress", response=opening)
    for index, item in enumerate(body["output"]):
        if item["type"] == "message":
            event("response.output_item.added", output_index=index, item={**item, "status": "in_progress",
                                                                          "content": []})
            for part_index, part in enumerate(item["content"]):
                text_key = "text" if part["type"] == "output_text" else "refusal"
                empty = {**part, text_key: ""}
                event("response.content_part.added", item_id=item["id"], output_index=index,
                      content_index=part_index, part=empty)
                for piece in _pieces(part[text_key]):
                    if text_key == "text":
                        event("response.output_text.delta", item_id=item["id"], output_index=index,
                              content_index=part_index, delta=piece, logprobs=[])
                    else:
                        event("response.refusal.delta", item_id=item["id"], output_index=index,
                              content_index=part_index, delta=piece)
                if text_key == "text":
                    event("response.output_text.done", item_id=item["id"], output_index=index,
                          content_index=part_index, text=part["text"], logprobs=[])
                else:
                    event("response.refusal.done", item_id=item["id"], output_index=index,
                          content_index=part_index, refusal=part["refusal"])
                event("response.content_part.done", item_id=item["id"], output_index=index,
                      content_index=part_index, part=part)
        elif item["type"] == "function_call":
            event("response.output_item.added", output_index=index, item={**item, "arguments": "",
                                                                          "status": "in_progress"})
            for piece in _pieces(item["arguments"]):
                event("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=piece)
            event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                  arguments=item["arguments"], name=item["name"])
        else:
            event("response.output_item.added", output_index=index, item=item)
        event("response.output_item.done", output_index=index, item=item)
    event("response.incomplete" if body.get("status") == "incomplete" else "response.completed", response=body)
    return out


def _messages(body: Mapping[str, Any]) -> list[bytes]:
    out: list[bytes] = []

    def event(kind: str, **fields: Any) -> None:
        out.append(_sse({"type": kind, **fields}, kind))

    usage = body["usage"]
    event("message_start", message={**body, "content": [], "stop_reason": None, "stop_sequence": None,
                                    "usage": {**usage, "output_tokens": 1}})
    for index, block in enumerate(body["content"]):
        if block["type"] == "text":
            event("content_block_start", index=index, content_block={"type": "text", "text": ""})
            for piece in _pieces(block["text"]):
                event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        elif block["type"] == "tool_use":
            event("content_block_start", index=index, content_block={**block, "input": {}})
            for piece in _pieces(json.dumps(block["input"])):
                event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
        else:
            event("content_block_start", index=index, content_block=block)
        event("content_block_stop", index=index)
    event("message_delta", delta={"stop_reason": body["stop_reason"], "stop_sequence": None},
          usage={"output_tokens": usage["output_tokens"]})
    event("message_stop")
    return out
