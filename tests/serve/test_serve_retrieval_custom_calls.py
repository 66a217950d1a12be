"""A reply holding a retrieval call and the client's custom tool call (apply_patch) goes to the client.

Custom tools are the caller's (the retrieval tools are functions): a reply calling one must reach the caller with the
call, never be answered internally (the caller would then see its patch call answered "aborted").
"""

from __future__ import annotations

import json
from typing import Any

from contextfold.serve.retrieval import TOOL_NAMES, RoundRelay, split_reply
from contextfold.serve.sse import SseEvent

RETRIEVAL = sorted(TOOL_NAMES)[0]
GREP_CALL = {"type": "function_call", "call_id": "r1", "name": RETRIEVAL, "arguments": '{"ref":"tout_x"}'}
PATCH_CALL = {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"}


def event(data: dict[str, Any]) -> SseEvent:
    text = json.dumps(data)
    return SseEvent(raw=f"event: {data['type']}\ndata: {text}\n\n".encode(), name=str(data["type"]), data=text)


def test_split_reply_keeps_a_custom_call_for_the_client() -> None:
    split = split_reply("responses", [GREP_CALL, PATCH_CALL])
    assert split.calls == [("r1", RETRIEVAL, '{"ref":"tout_x"}')]
    assert split.client_items == [PATCH_CALL]
    assert split.for_client


def test_a_streamed_round_with_a_custom_call_is_the_last() -> None:
    relay = RoundRelay("responses")
    for index, item in enumerate((GREP_CALL, PATCH_CALL)):
        relay.feed(event({"type": "response.output_item.added", "output_index": index, "item": item}))
        relay.feed(event({"type": "response.output_item.done", "output_index": index, "item": item}))
    assert relay.own_calls
    assert relay.end_round() is False  # no further round: the client gets the reply with its patch call
