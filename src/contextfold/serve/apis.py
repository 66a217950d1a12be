"""The three APIs the proxy speaks, each reduced to what a session needs: its history, the view put back, the reply.

- ``chat``: OpenAI Chat Completions (``messages``; the system prompt is one of them).
- ``responses``: OpenAI Responses (``input`` and ``instructions``; or only the new ``input`` after a
  ``previous_response_id`` / in a ``conversation``, where the proxy holds the history).
- ``messages``: Anthropic Messages (``system`` and ``messages``).

Nothing here does I/O: bodies in, bodies out.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ContextfoldError, InvalidHistory
from ..formats._common import MAX_NESTING, RESPONSES_CALL_TYPES, check_nesting
from .identity import CACHE_MARK

__all__ = ["API_NAMES", "ApiName", "BadRequest", "Conflict", "Exchange", "item_key", "parse_request", "reply_items",
           "reply_usage", "upstream_body"]

ApiName = Literal["chat", "responses", "messages"]
API_NAMES: tuple[ApiName, ...] = ("chat", "responses", "messages")
# The contextfold wire format of each API.
FORMATS: dict[ApiName, str] = {"chat": "openai_chat", "responses": "openai_responses", "messages": "anthropic"}
# Which upstream serves each API.
PROVIDERS: dict[ApiName, str] = {"chat": "openai", "responses": "openai", "messages": "anthropic"}
# The id the Responses instructions are pinned under in a session (they travel in their own field).
INSTRUCTIONS_ID = "serve:instructions"
# Hex digits of an item key: collisions within one conversation are out of reach.
_KEY_HEX = 20
# The most prompt-cache marks (identity.CACHE_MARK) a request may carry: Anthropic refuses more.
MAX_CACHE_MARKS = 4


class BadRequest(ContextfoldError):
    """A request the proxy cannot serve; the message names the field and the problem."""

    def __init__(self, problem: str, field: str) -> None:
        self.field = field
        super().__init__(f"{field}: {problem}")


class Conflict(BadRequest):
    """A continuation the session cannot take (a response that is not the session's latest, or one in flight); 409."""


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request as the proxy sees it.

    Attributes:
        api: Which API.
        body: The request body as sent.
        model: Its ``model``.
        items: The conversation items it carries, oldest first (the Anthropic ``system`` is the first item).
        instructions: The Responses ``instructions`` (pinned in the session, sent back in their own field).
        handle: ``("response", id)`` or ``("conversation", id)`` when the proxy holds the history, else None.
        stream: Whether the caller asked for server-sent events.
        reply_tokens: What the request reserves for the reply, when the provider counts it against the window.
    """

    api: ApiName
    body: dict[str, Any]
    model: str
    items: list[dict[str, Any]]
    instructions: str | None
    handle: tuple[str, str] | None
    stream: bool
    reply_tokens: int

    @property
    def format(self) -> str:
        """The contextfold wire format of the API."""
        return FORMATS[self.api]

    @property
    def provider(self) -> str:
        """``openai`` or ``anthropic``."""
        return PROVIDERS[self.api]

    @property
    def caches(self) -> bool:
        """Whether an Anthropic request asks for prompt caching (a ``cache_control`` mark anywhere in it).

        The session's view then carries contextfold's breakpoints in place of the client's marks on its messages.
        """
        return self.api == "messages" and _marks(self.body) > 0


def _items(value: Any, field: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise BadRequest(f"expected a list of items, got {type(value).__name__}", field)
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise BadRequest(f"expected an object, got {type(item).__name__}", f"{field}[{i}]")
    return value


# Longer than any provider's model id (fine-tuned ids, deployment names and ARNs stay well under it).
MAX_MODEL_NAME = 256
# The longest response or conversation id taken: a provider's are a few dozen characters, a gateway's encoded ones a
# few hundred. Named in errors and log lines (a 10 MB id went into both whole) and hashed into the session's name.
MAX_HANDLE = 1_024
# Containers nested deeper than this in a request body are refused: an item sits two levels down (``messages[i]``)
# and the formats take it up to MAX_NESTING deep; the proxy's own walks of a body (its opening's fingerprint, item
# keys, cache marks) recurse, and a body 900 deep made them hit Python's recursion limit (an internal error).
MAX_BODY_NESTING = MAX_NESTING + 2


# The body's fields a nesting error may name: the client's own keys are not repeated (the refusal is logged before
# the session, and the secrets it remembers, are known).
_NAMED_FIELDS = frozenset({"messages", "input", "system", "tools", "instructions", "text", "response_format",
                           "tool_choice", "metadata"})
_ITEM_FIELD = re.compile(r"(\w+)(\[\d+\])?")


def _check_body_nesting(body: dict[str, Any]) -> None:
    """BadRequest naming the field where ``body`` nests containers deeper than ``MAX_BODY_NESTING``.

    The field is named down to its item (``messages[3]``), an API field's only.
    """
    try:
        check_nesting(body, limit=MAX_BODY_NESTING)
    except InvalidHistory as exc:
        named = _ITEM_FIELD.match(exc.field or "")
        field = named.group(0) if named is not None and named.group(1) in _NAMED_FIELDS else "body"
        raise BadRequest(f"{exc.problem} (at most {MAX_BODY_NESTING} levels of objects and arrays in a request)",
                         field) from None


def parse_request(api: ApiName, body: Any) -> Exchange:
    """The :class:`Exchange` of a request body; :class:`BadRequest` naming the field when it is not one."""
    if not isinstance(body, dict):
        raise BadRequest(f"the request body must be a JSON object, got {type(body).__name__}", "body")
    _check_body_nesting(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("a model name is required", "model")
    if len(model) > MAX_MODEL_NAME:
        # The name is looked up in the model registry (which remembers what it resolved) and named in errors and
        # log lines: a megabyte "name" must not reach either.
        raise BadRequest(f"a model name is at most {MAX_MODEL_NAME} characters, got {len(model):,}", "model")
    stream = body.get("stream") is True
    options = body.get("stream_options")
    if stream and api == "chat" and options is not None and not isinstance(options, Mapping):
        # The proxy adds include_usage to it (upstream_body): an int or a list there was an internal error.
        raise BadRequest(f"expected an object, got {type(options).__name__}", "stream_options")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        # Counted against the window and, with the retrieval tools on, extended: no API takes anything else there.
        raise BadRequest(f"expected a list of tools, got {type(tools).__name__}", "tools")
    instructions: str | None = None
    handle: tuple[str, str] | None = None
    reply_tokens = 0
    if api == "chat":
        items = _items(body.get("messages"), "messages")
    elif api == "responses":
        raw = body.get("input", [])
        items = [{"role": "user", "content": raw}] if isinstance(raw, str) else _items(raw, "input")
        value = body.get("instructions")
        if value is not None and not isinstance(value, str):
            raise BadRequest("the proxy takes instructions as text", "instructions")
        instructions = value or None
        previous, conversation = body.get("previous_response_id"), body.get("conversation")
        if isinstance(conversation, Mapping):
            conversation = conversation.get("id")
        if previous is not None and conversation is not None:
            raise BadRequest("give previous_response_id or conversation, not both", "previous_response_id")
        if previous is not None:
            handle = ("response", _handle(previous, "previous_response_id", "a response id"))
        elif conversation is not None:
            handle = ("conversation", _handle(conversation, "conversation", "a conversation id"))
    else:
        items = _items(body.get("messages"), "messages")
        system = body.get("system")
        if system is not None:
            if not isinstance(system, str | list):
                raise BadRequest("must be text or a list of text blocks", "system")
            items = [{"role": "system", "content": system}, *items]
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0:
            reply_tokens = max_tokens  # Anthropic counts it against the window
    if not items:
        raise BadRequest("the conversation is empty", "input" if api == "responses" else "messages")
    return Exchange(api, body, model, items, instructions, handle, stream, reply_tokens)


def _handle(value: Any, field: str, what: str) -> str:
    """A response or conversation id as the request gives it; BadRequest (naming its length only) when it is none."""
    if not isinstance(value, str) or not value:
        raise BadRequest(f"must be {what}", field)
    if len(value) > MAX_HANDLE:
        raise BadRequest(f"{what} is at most {MAX_HANDLE:,} characters, got {len(value):,}", field)
    return value


def _plain(value: Any, drop: str = "") -> Any:
    """``value`` without None values and empty containers: how one SDK or another re-sends an item varies there.

    ``drop``: a key left out at every depth.
    """
    if isinstance(value, Mapping):
        out = {k: _plain(v, drop) for k, v in value.items() if v is not None and k != drop}
        return {k: v for k, v in out.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [_plain(v, drop) for v in value]
    return value


def item_key(item: Mapping[str, Any]) -> str:
    """The identity key of a conversation item: a fingerprint of its content (reconciliation compares these).

    A ``cache_control`` mark is not content: a client following Anthropic's guide moves it to its last message
    every turn, and the message it leaves is the same message (keyed with it, every request was an edited history).
    """
    data = json.dumps(_plain(item, CACHE_MARK), sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.blake2b(data.encode("utf-8", "surrogatepass"), digest_size=_KEY_HEX // 2).hexdigest()


def upstream_body(exchange: Exchange, view: Any) -> dict[str, Any]:
    """The body sent upstream: the caller's, with the session's view in place of its conversation.

    ``view`` is ``cm.prepare(format)``: a list of items (chat, responses) or ``{"system", "messages"}``
    (Anthropic). A Responses handle is dropped: the proxy sends the whole view.
    """
    body = dict(exchange.body)
    if exchange.api == "chat":
        body["messages"] = view
    elif exchange.api == "responses":
        body["input"] = view
        body.pop("previous_response_id", None)
        body.pop("conversation", None)
    else:
        body.pop("system", None)
        body.update(view)
        _cap_marks(body)
    if exchange.stream and exchange.api == "chat":
        # The usage of a streamed reply comes only in a last chunk the caller may not have asked for; the proxy
        # needs it (recorded usage), and drops that chunk again when the caller did not ask (streams.py).
        body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    return body


def _marks(value: Any) -> int:
    """The ``cache_control`` marks in a JSON value."""
    if isinstance(value, Mapping):
        return int(CACHE_MARK in value) + sum(_marks(v) for k, v in value.items() if k != CACHE_MARK)
    if isinstance(value, list):
        return sum(_marks(v) for v in value)
    return 0


def _cap_marks(body: dict[str, Any]) -> None:
    """Keep an Anthropic body within ``MAX_CACHE_MARKS``, the client's marks on its tools first.

    The client's marks on its tools (and at the top level) stay; of the view's, the first (the pinned head) and the
    last ones, its earlier ones dropped first. The view's blocks are the manager's (read-only): a block losing its
    mark is copied.
    """
    outside = _marks({k: v for k, v in body.items() if k not in ("system", "messages")})
    places: list[tuple[list[Any], int]] = []  # (the block list, the block's index) of each marked view block
    system = body.get("system")
    if isinstance(system, list):
        body["system"] = system = list(system)
        places.extend((system, i) for i, b in enumerate(system) if isinstance(b, Mapping) and CACHE_MARK in b)
    messages = body.get("messages")
    if isinstance(messages, list):
        body["messages"] = messages = list(messages)
        for m, message in enumerate(messages):
            content = message.get("content") if isinstance(message, Mapping) else None
            if isinstance(content, list) and any(isinstance(b, Mapping) and CACHE_MARK in b for b in content):
                messages[m] = {**message, "content": (blocks := list(content))}
                places.extend((blocks, i) for i, b in enumerate(blocks) if isinstance(b, Mapping) and CACHE_MARK in b)
    room = max(0, MAX_CACHE_MARKS - outside)
    if len(places) <= room:
        return
    dropped = places[1:len(places) - room + 1] if room else places
    for blocks, i in dropped:
        blocks[i] = {k: v for k, v in blocks[i].items() if k != CACHE_MARK}


def caller_wants_usage(exchange: Exchange) -> bool:
    """Whether the caller asked for the usage chunk of a Chat Completions stream."""
    options = exchange.body.get("stream_options")
    return isinstance(options, Mapping) and options.get("include_usage") is True


def reply_items(api: ApiName, response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The reply as conversation items of the API (what the caller appends to its history)."""
    if api == "chat":
        choices = response.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, Mapping) else None
        return [dict(_plain(message))] if isinstance(message, Mapping) else []
    if api == "responses":
        output = response.get("output")
        return [dict(_plain(item)) for item in output if isinstance(item, Mapping)] if isinstance(output, list) else []
    content = response.get("content")
    return [{"role": "assistant", "content": content}] if isinstance(content, list) and content else []


def reply_usage(response: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The usage a reply reports, as the API shapes it."""
    usage = response.get("usage")
    return usage if isinstance(usage, Mapping) else None


def tool_call_names(api: ApiName, items: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of the tools a reply calls."""
    names: list[str] = []
    for item in items:
        if api == "chat":
            names += [str((c.get("function") or {}).get("name")) for c in item.get("tool_calls") or ()]
        elif api == "responses":
            if item.get("type") in RESPONSES_CALL_TYPES:
                names.append(str(item.get("name")))
        else:
            names += [str(b.get("name")) for b in item.get("content") or () if isinstance(b, Mapping)
                      and b.get("type") == "tool_use"]
    return names
