"""Retrieval tools answered inside the proxy: ``tool_output_cache``, ``tool_output_cache_grep``, ``history_search``.

With ``retrieval_tools`` on, every upstream request carries the three tools (in the API's shape) beside the
client's own. When the model calls them, the proxy answers from the session (its tool output cache and archive,
both scoped to the session: one caller never reads another's outputs), records the calls and their results in the
session as an assistant message of their own followed by the results, and:

- if the reply holds nothing else for the client, calls the upstream again with the new view;
- otherwise gives the client the reply without the retrieval calls (its text and its own tool calls).

So the client only ever sees its own tools. Streams are relayed the same way (:class:`RoundRelay`): events about
retrieval calls are held back, the closing events of a round that is followed by another are dropped, and the
indexes of what the client sees are renumbered so that the rounds read as one reply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..archive.search import HISTORY_SEARCH_TOOL, HistorySearchTool, history_search_schema
from ..cache import GREP_TOOL, READ_TOOL, retrieval_tool_schemas
from ..formats._common import RESPONSES_CALL_TYPES
from ..formats.intake import UNPARSED_ARGUMENTS, repair_reply_arguments
from ..messages import ToolCall
from .apis import FORMATS, ApiName
from .sse import SseEvent, encode_event

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["MAX_ROUNDS", "TOOL_NAMES", "RoundRelay", "Split", "added_schemas", "added_tool_names", "answer",
           "proxy_tool_names", "split_reply", "with_tools"]

TOOL_NAMES = frozenset({READ_TOOL, GREP_TOOL, HISTORY_SEARCH_TOOL})
# Upstream calls answering retrieval calls in one request before the reply goes to the client anyway: a model that
# keeps reading can still not hold the client's request forever.
MAX_ROUNDS = 6


def _tool_name(tool: Any) -> Any:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        return function.get("name") if isinstance(function, Mapping) else tool.get("name")
    return None


def proxy_tool_names(body: Mapping[str, Any]) -> frozenset[str]:
    """The retrieval tools the proxy answers for a request: those the client did not declare as its own.

    A client's own tool named ``history_search`` is the client's: its calls go to the client (the proxy answered
    them from its archive, and the client's tool never ran).
    """
    tools = body.get("tools")
    declared = {_tool_name(t) for t in tools if isinstance(_tool_name(t), str)} if isinstance(tools, list) else set()
    return TOOL_NAMES - declared


def added_tool_names(body: Mapping[str, Any], cm: ContextManager) -> frozenset[str]:
    """The retrieval tools :func:`with_tools` adds to ``body`` for ``cm``'s session: those it can answer."""
    kept: set[str] = set()
    if cm.cache is not None:
        kept |= {READ_TOOL, GREP_TOOL}
    if cm.archive is not None:
        kept.add(HISTORY_SEARCH_TOOL)
    return proxy_tool_names(body) & kept


def with_tools(api: ApiName, format: str, body: dict[str, Any], cm: ContextManager) -> dict[str, Any]:
    """``body`` with the retrieval tools the session can answer added to its ``tools``."""
    return {**body, "tools": [*(body.get("tools") or ()), *added_schemas(format, body, cm)]}


def added_schemas(format: str, body: Mapping[str, Any], cm: ContextManager) -> list[dict[str, Any]]:
    """The schemas (in ``format``'s shape) of the retrieval tools :func:`with_tools` adds to ``body`` for ``cm``.

    What the request carries beside the client's tools: counted against the window with the view
    (``serve.sessions``), or a view fitted without them went out over the threshold by them (~266 tokens).
    """
    from ..formats.tool_schemas import tool_schema

    tools = body.get("tools")
    present = {name for name in map(_tool_name, tools) if isinstance(name, str)} if isinstance(tools, list) else set()
    schemas: list[dict[str, Any]] = []
    if cm.cache is not None:
        schemas += [dict(s) for s in retrieval_tool_schemas("openai_responses")]
    if cm.archive is not None:
        schemas.append(history_search_schema("openai_responses"))
    return [tool_schema(format, str(spec["name"]), str(spec["description"]), spec["parameters"])
            for spec in schemas if spec["name"] not in present]  # (a client's name may be a list: never present)


def answer(cm: ContextManager, name: str, arguments: Any, call_id: str) -> str:
    """The result of one retrieval call from the session; a bad call gets a text saying what to fix."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments if isinstance(arguments, Mapping)
                                                                  else {})
    call = ToolCall(call_id, name, raw or "{}")
    if name == HISTORY_SEARCH_TOOL:
        if cm.archive is None:
            return "error: history_search is not available: this session keeps no archive"
        cache = cm.cache
        tool = HistorySearchTool(cm.archive, cm.session_id, resolve_ref=cache.get if cache is not None else None)
        return str(tool.execute_tool_call(call).text)
    if cm.cache is None:
        return f"error: {name} is not available: this session keeps no tool output cache"
    return str(cm.cache.execute_tool_call(call).text)


@dataclass
class Split:
    """A reply split in two: the retrieval calls the proxy answers, and what the client gets."""

    calls: list[tuple[str, str, Any]] = field(default_factory=list)  # (id, name, arguments)
    client_items: list[dict[str, Any]] = field(default_factory=list)
    for_client: bool = False  # the reply holds something of the client's (text with no calls, or its own calls)

    def internal(self, api: ApiName, answers: Sequence[str]) -> list[dict[str, Any]]:
        """The retrieval calls and their results as the API's items (what the session records).

        The model wrote the calls: arguments that are no JSON object are kept wrapped in one
        (``formats.intake.repair_reply_arguments``), ids as text; recorded as written, the session refused them.
        """
        return [dict(item) for item in repair_reply_arguments(FORMATS[api], self._items(api, answers))]

    def _items(self, api: ApiName, answers: Sequence[str]) -> list[dict[str, Any]]:
        pairs = [((str(i) or f"retrieval_{k}", n, a), text)  # (an empty id: the session takes none)
                 for k, ((i, n, a), text) in enumerate(zip(self.calls, answers, strict=True))]
        if api == "chat":
            return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": _json(a)}} for (i, n, a), _ in pairs
            ]}, *({"role": "tool", "tool_call_id": i, "content": text} for (i, _n, _a), text in pairs)]
        if api == "responses":
            return [*({"type": "function_call", "call_id": i, "name": n, "arguments": _json(a)}
                      for (i, n, a), _ in pairs),
                    *({"type": "function_call_output", "call_id": i, "output": text} for (i, _n, _a), text in pairs)]
        return [{"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": n, "input": _obj(a)}
                                                  for (i, n, a), _ in pairs]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": text}
                                             for (i, _n, _a), text in pairs]}]


def _json(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _obj(arguments: Any) -> dict[str, Any]:
    """The arguments as an Anthropic ``input``: an object, whatever the model wrote (kept as text when no object)."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments else {}
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    elif isinstance(arguments, dict):
        return arguments
    return {UNPARSED_ARGUMENTS: _json(arguments)}


def split_reply(api: ApiName, items: Sequence[Mapping[str, Any]], names: frozenset[str] = TOOL_NAMES) -> Split:
    """Split a reply's items (``reply_items``) into calls of the retrieval tools ``names`` and the client's part."""
    split = Split()
    for item in items:
        if api == "chat":
            calls = list(item.get("tool_calls") or ())
            mine = [c for c in calls if (c.get("function") or {}).get("name") in names]
            split.calls += [(str(c["id"]), c["function"]["name"], c["function"].get("arguments")) for c in mine]
            rest = [c for c in calls if c not in mine]
            message = {k: v for k, v in item.items() if k != "tool_calls"}
            if rest:
                message["tool_calls"] = rest
            split.client_items.append(message)
            split.for_client |= bool(rest) or (not mine and bool(item.get("content")))
        elif api == "responses":
            if item.get("type") == "function_call" and item.get("name") in names:
                split.calls.append((str(item.get("call_id")), str(item["name"]), item.get("arguments")))
            else:
                split.client_items.append(dict(item))
        else:
            blocks = [b for b in item.get("content") or () if isinstance(b, Mapping)]
            mine = [b for b in blocks if b.get("type") == "tool_use" and b.get("name") in names]
            split.calls += [(str(b.get("id")), str(b["name"]), b.get("input")) for b in mine]
            rest = [b for b in blocks if b not in mine]
            split.client_items.append({**item, "content": rest})
            split.for_client |= any(b.get("type") == "tool_use" for b in rest) or (not mine and bool(rest))
    if api == "responses":
        own_calls = any(i.get("type") in RESPONSES_CALL_TYPES for i in split.client_items)
        split.for_client = own_calls or not split.calls
    return split


def client_payload(api: ApiName, payload: Mapping[str, Any], split: Split) -> dict[str, Any]:
    """The upstream's reply body with the retrieval calls taken out."""
    out = dict(payload)
    if api == "chat":
        choices = [dict(c) for c in payload.get("choices") or ()]
        if choices and split.client_items:
            choices[0]["message"] = {**(choices[0].get("message") or {}), **split.client_items[0]}
            if "tool_calls" not in split.client_items[0]:
                choices[0]["message"].pop("tool_calls", None)
        out["choices"] = choices
    elif api == "responses":
        out["output"] = split.client_items
    else:
        out["content"] = split.client_items[0]["content"] if split.client_items else []
    return out


class RoundRelay:
    """Rewrites the events of successive upstream streams (rounds) into one stream for the client.

    Feed each round's events with :meth:`feed` (it returns the bytes to send now); :meth:`end_round` tells whether
    the round called retrieval tools only (then another round follows) and :meth:`closing` gives the held-back
    closing events of the last round.
    """

    def __init__(self, api: ApiName, names: frozenset[str] = TOOL_NAMES) -> None:
        self.api = api
        self.names = names  # the retrieval tools the proxy answers (proxy_tool_names)
        self.round = 0
        self._hidden: set[int] = set()  # this round's upstream indexes of retrieval calls
        self._index: dict[int, int] = {}  # this round's upstream index -> the client's index
        self._next_index = 0
        self._held: list[bytes] = []
        self._sequence = 0
        self._items: list[Any] = []  # Responses: the output items the client got, for the final response event
        self.own_calls = False
        self.text = False
        self.calls: list[tuple[str, str, Any]] = []
        self._partial: dict[int, dict[str, Any]] = {}
        self.response_id: str | None = None  # Responses: the id the client was told in the first round

    def next_round(self) -> None:
        """A new upstream stream follows."""
        self.round += 1
        self._hidden.clear()
        self._index.clear()
        self._held.clear()
        self._partial.clear()
        self.calls = []

    def _client_index(self, index: int) -> int:
        if index not in self._index:
            self._index[index] = self._next_index
            self._next_index += 1
        return self._index[index]

    def feed(self, event: SseEvent) -> list[bytes]:
        """The bytes to send the client for one upstream event (possibly none).

        An event of a shape this cannot read (a tool-call delta with ``"index": null``) goes to the client as it
        came: reading the stream must never cut it.
        """
        data = event.json()
        try:
            if self.api == "chat":
                return self._chat(event, data)
            if self.api == "responses":
                return self._responses(data)
            return self._messages(data)
        except (TypeError, ValueError, AttributeError):
            return [event.raw]

    def end_round(self) -> bool:
        """True when this round called retrieval tools and nothing of the client's: another round follows."""
        for index, slot in sorted(self._partial.items()):
            if index in self._hidden:
                self.calls.append((slot["id"], slot["name"], "".join(slot["arguments"])))
        return bool(self.calls) and not self.own_calls

    def closing(self) -> list[bytes]:
        """The closing events of the last round."""
        return list(self._held)

    # -- Chat Completions -------------------------------------------------------------------------------------
    def _chat(self, event: SseEvent, data: Any) -> list[bytes]:
        if event.data == "[DONE]":
            self._held.append(event.raw)
            return []
        if not isinstance(data, dict):
            return [event.raw]
        choices = data.get("choices") or []
        if not choices:
            self._held.append(event.raw)  # the usage chunk closes the stream
            return []
        choice = dict(choices[0])
        delta = dict(choice.get("delta") or {})
        calls = []
        for call in delta.get("tool_calls") or ():
            index = int(call.get("index", 0))
            slot = self._partial.setdefault(index, {"id": None, "name": "", "arguments": []})
            function = call.get("function") or {}
            slot["id"] = call.get("id") or slot["id"]
            slot["name"] += function.get("name") or ""
            slot["arguments"].append(function.get("arguments") or "")
            if function.get("name") in self.names:
                self._hidden.add(index)
            if index in self._hidden:
                continue
            self.own_calls = True
            calls.append({**call, "index": self._client_index(index)})
        if "tool_calls" in delta:
            if not calls:
                delta.pop("tool_calls")
            else:
                delta["tool_calls"] = calls
        if delta.get("content"):
            self.text = True
        if choice.get("finish_reason"):
            if not self.own_calls and choice["finish_reason"] == "tool_calls":
                choice["finish_reason"] = "stop"
            self._held.append(encode_event({**data, "choices": [{**choice, "delta": delta}]}))
            return []
        if not delta and not choice.get("finish_reason") and "tool_calls" in (choices[0].get("delta") or {}):
            return []  # a delta of a retrieval call only
        return [encode_event({**data, "choices": [{**choice, "delta": delta}]})]

    # -- Responses --------------------------------------------------------------------------------------------
    def _responses(self, data: Any) -> list[bytes]:
        if not isinstance(data, dict):
            return []
        kind = str(data.get("type", ""))
        if kind in ("response.created", "response.in_progress"):
            if self.round == 0 and isinstance(data.get("response"), dict):
                self.response_id = data["response"].get("id")
            return self._emit(data) if self.round == 0 else []
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            response = dict(data.get("response") or {})
            response["output"] = list(self._items)
            if self.response_id is not None:  # the client knows the response by the first round's id
                response["id"] = self.response_id
            self._held.append(self._encode({**data, "response": response}))
            return []
        if "output_index" not in data:
            return self._emit(data)
        index = int(data["output_index"])
        item = data.get("item")
        if kind == "response.output_item.added" and isinstance(item, dict):
            if item.get("type") == "function_call" and item.get("name") in self.names:
                self._hidden.add(index)
                self._partial[index] = {"id": item.get("call_id"), "name": item["name"], "arguments": []}
            elif item.get("type") in RESPONSES_CALL_TYPES:
                self.own_calls = True
        if index in self._hidden:
            if kind == "response.function_call_arguments.done":
                self._partial[index]["arguments"] = [str(data.get("arguments", ""))]
            return []
        if kind == "response.output_item.done" and isinstance(item, dict):
            self._items.append(item)
        return self._emit({**data, "output_index": self._client_index(index)})

    def _emit(self, data: dict[str, Any]) -> list[bytes]:
        return [self._encode(data)]

    def _encode(self, data: dict[str, Any]) -> bytes:
        if "sequence_number" in data:
            data = {**data, "sequence_number": self._sequence}
            self._sequence += 1
        return encode_event(data, str(data.get("type")))

    # -- Anthropic Messages -----------------------------------------------------------------------------------
    def _messages(self, data: Any) -> list[bytes]:
        if not isinstance(data, dict):
            return []
        kind = str(data.get("type", ""))
        if kind == "message_start":
            return [encode_event(data, kind)] if self.round == 0 else []
        if kind in ("message_delta", "message_stop"):
            if kind == "message_delta" and not self.own_calls:
                delta = dict(data.get("delta") or {})
                if delta.get("stop_reason") == "tool_use":
                    delta["stop_reason"] = "end_turn"
                data = {**data, "delta": delta}
            self._held.append(encode_event(data, kind))
            return []
        if "index" not in data:
            return [encode_event(data, kind)]
        index = int(data["index"])
        block = data.get("content_block")
        if kind == "content_block_start" and isinstance(block, dict) and block.get("type") == "tool_use":
            if block.get("name") in self.names:
                self._hidden.add(index)
                self._partial[index] = {"id": block.get("id"), "name": block["name"], "arguments": []}
            else:
                self.own_calls = True
        if index in self._hidden:
            piece = data.get("delta")
            if isinstance(piece, dict) and piece.get("type") == "input_json_delta":
                self._partial[index]["arguments"].append(str(piece.get("partial_json", "")))
            return []
        return [encode_event({**data, "index": self._client_index(index)}, kind)]
