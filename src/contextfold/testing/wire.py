"""What the scripted LLM server says: scripted replies and errors, rendered as each API's real JSON bodies.

Three APIs: OpenAI Chat Completions (``chat``), OpenAI Responses (``responses``) and Anthropic Messages
(``messages``). Bodies follow the providers' documented shapes closely enough that the official SDKs parse them
into their own types and raise their own error classes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..tokens import TokenCounter

__all__ = ["API", "ErrorReply", "Reply", "ScriptedToolCall", "count_media", "error_body", "reply_body",
           "request_tokens"]

API = Literal["chat", "responses", "messages"]

# Per-message overhead the providers add around each message (role markers); an estimate, as they do not publish it.
MESSAGE_OVERHEAD_TOKENS = 4


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    """A tool call the scripted model makes; ``id`` is generated when not given."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        """The arguments as the JSON string OpenAI sends."""
        return self.arguments if isinstance(self.arguments, str) else json.dumps(dict(self.arguments))


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful scripted reply: text, tool calls, or a refusal.

    ``finish_reason`` overrides the computed one (``"stop"``, ``"length"``, ``"tool_calls"``); ``input_tokens`` /
    ``output_tokens`` override the counted usage. ``reasoning`` is what the model thought first: a signed thinking
    block (Anthropic, when the request turns thinking on) or a reasoning item with encrypted content (Responses).
    """

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    refusal: str | None = None
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning: str | None = None

    @classmethod
    def refused(cls, text: str = "I'm sorry, but I can't help with that.") -> Reply:
        """A refusal, rendered as each API reports one."""
        return cls(refusal=text)

    @classmethod
    def calling(cls, *calls: ScriptedToolCall, text: str = "") -> Reply:
        """A reply that calls tools."""
        return cls(text=text, tool_calls=calls)


ErrorKind = Literal["invalid_request", "context_overflow", "rate_limit", "server_error", "overloaded",
                    "authentication", "not_found", "request_too_large", "too_much_media"]

# kind -> (HTTP status, OpenAI error type, OpenAI code, Anthropic error type, default message)
_ERRORS: dict[str, tuple[int, str, str | None, str, str]] = {
    "invalid_request": (400, "invalid_request_error", None, "invalid_request_error", "Invalid request."),
    "context_overflow": (400, "invalid_request_error", "context_length_exceeded", "invalid_request_error", ""),
    "rate_limit": (429, "requests", "rate_limit_exceeded", "rate_limit_error",
                   "Rate limit reached for requests. Please try again in 20ms."),
    "server_error": (500, "server_error", None, "api_error",
                     "The server had an error while processing your request. Sorry about that!"),
    "overloaded": (529, "server_error", None, "overloaded_error", "Overloaded"),
    "authentication": (401, "invalid_request_error", "invalid_api_key", "authentication_error",
                       "Incorrect API key provided."),
    "not_found": (404, "invalid_request_error", None, "not_found_error", "Not found."),
    # Anthropic's Messages API answers a body over 32 MB from Cloudflare, before the API reads it.
    "request_too_large": (413, "invalid_request_error", "request_too_large", "request_too_large",
                          "Request exceeds the maximum allowed number of bytes."),
    "too_much_media": (400, "invalid_request_error", None, "invalid_request_error", ""),
}


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A scripted error, rendered as the provider's real error body for whichever API was called.

    ``context_overflow`` builds the provider's own wording from ``prompt_tokens`` and ``limit``. ``code`` names the
    cause where the API has a field for it (Anthropic's ``error.details.error_code``, OpenAI's ``error.code``).
    """

    kind: ErrorKind = "server_error"
    message: str | None = None
    prompt_tokens: int | None = None
    limit: int | None = None
    max_tokens: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    code: str | None = None

    @property
    def status(self) -> int:
        """The HTTP status of the error (Anthropic's 529 for ``overloaded``; OpenAI answers 503 instead)."""
        return _ERRORS[self.kind][0]

    @classmethod
    def rate_limit(cls) -> ErrorReply:
        """HTTP 429."""
        return cls("rate_limit", headers={"retry-after-ms": "1"})

    @classmethod
    def server_error(cls) -> ErrorReply:
        """HTTP 500."""
        return cls("server_error")

    @classmethod
    def request_too_large(cls) -> ErrorReply:
        """HTTP 413: the request's bytes are over the provider's limit."""
        return cls("request_too_large")

    @classmethod
    def too_much_media(cls, images: int, documents: int, limit: int) -> ErrorReply:
        """HTTP 400: more images and documents than the provider takes (Anthropic's wording for the Messages API)."""
        return cls("too_much_media", f"Too much media: {documents} document pages + {images} images > {limit}")

    @classmethod
    def overflow(cls, prompt_tokens: int, limit: int) -> ErrorReply:
        """The context-length error of the API called, as if the prompt had ``prompt_tokens`` tokens."""
        return cls("context_overflow", prompt_tokens=prompt_tokens, limit=limit)


def _overflow_message(api: API, error: ErrorReply) -> str:
    prompt, limit = error.prompt_tokens or 0, error.limit or 0
    if api == "chat":
        return (f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
                f"{prompt} tokens. Please reduce the length of the messages.")
    if api == "responses":
        return "Your input exceeds the context window of this model. Please adjust your input and try again."
    if error.max_tokens is not None:
        return (f"input length and `max_tokens` exceed context limit: {prompt} + {error.max_tokens} > {limit}, "
                "decrease input length or `max_tokens` and try again")
    return f"prompt is too long: {prompt} tokens > {limit} maximum"


def error_body(api: API, error: ErrorReply, request_number: int) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON body of ``error`` as ``api`` returns it."""
    status, openai_type, code, anthropic_type, default = _ERRORS[error.kind]
    message = error.message or (_overflow_message(api, error) if error.kind == "context_overflow" else default)
    if api == "messages":
        detail: dict[str, Any] = {"type": anthropic_type, "message": message}
        if error.code is not None:
            detail["details"] = {"error_code": error.code}
        return status, {"type": "error", "error": detail, "request_id": f"req_scripted_{request_number}"}
    if error.kind == "overloaded":
        status = 503  # OpenAI has no 529; it reports overload as 503
    param = ("messages" if api == "chat" else "input") if error.kind == "context_overflow" else None
    return status, {"error": {"message": message, "type": openai_type, "param": param, "code": error.code or code}}


# -- media ------------------------------------------------------------------------------------------------------

# Content blocks that are an image or a document, per API (Anthropic's may sit inside a tool_result's content).
_IMAGE_TYPES = frozenset({"image", "image_url", "input_image"})
_DOCUMENT_TYPES = frozenset({"document", "file", "input_file"})


def count_media(api: API, body: Mapping[str, Any]) -> tuple[int, int]:
    """(images, documents) in a request's conversation items, wherever they are nested."""
    items = body.get("input") if api == "responses" else body.get("messages")
    images = documents = 0
    stack: list[Any] = [items]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, Mapping):
            kind = value.get("type")
            if kind in _IMAGE_TYPES:
                images += 1
            elif kind in _DOCUMENT_TYPES:
                documents += 1
            else:
                stack.extend(v for v in value.values() if isinstance(v, list | Mapping))
    return images, documents


# -- token counting ---------------------------------------------------------------------------------------------


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            # Opaque provider tokens are billed as what they stand for, not as their base64 (see context_management).
            if key not in ("type", "role", "cache_control", "id", "call_id", "tool_call_id", "tool_use_id",
                           "signature", "encrypted_content"):
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def request_tokens(api: API, body: Mapping[str, Any], counter: TokenCounter) -> int:
    """Tokens of a request's input (messages, system, tools) as the scripted server counts them."""
    if api == "chat":
        items: Any = body.get("messages") or []
    elif api == "responses":
        raw = body.get("input") or []
        items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
        if body.get("instructions"):
            items = [{"role": "system", "content": body["instructions"]}, *items]
    else:
        items = list(body.get("messages") or [])
        if body.get("system"):
            items = [{"role": "system", "content": body["system"]}, *items]
    total = sum(MESSAGE_OVERHEAD_TOKENS + sum(counter.count(s) for s in _strings(item)) for item in items)
    tools = body.get("tools") or []
    return total + sum(counter.count(json.dumps(tool)) for tool in tools)


# -- successful replies -----------------------------------------------------------------------------------------


def _usage(api: API, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    if api == "chat":
        return {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                              "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
    if api == "responses":
        return {"input_tokens": input_tokens, "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0}}
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0}


def reply_body(api: API, reply: Reply, *, model: str, number: int, input_tokens: int, output_tokens: int,
               truncated: bool, request: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body ``api`` returns for ``reply`` (``truncated``: cut at the request's max tokens)."""
    calls = [(c, c.id or f"call_scripted_{number}_{i}") for i, c in enumerate(reply.tool_calls)]
    usage = _usage(api, reply.input_tokens if reply.input_tokens is not None else input_tokens,
                   reply.output_tokens if reply.output_tokens is not None else output_tokens)
    created = 1_700_000_000 + number  # deterministic, so recorded bodies compare equal across runs
    if api == "chat":
        finish = reply.finish_reason or ("length" if truncated else "tool_calls" if calls else "stop")
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": reply.refusal,
                                   "annotations": []}
        if calls:
            message["tool_calls"] = [{"id": cid, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments_json()}}
                                     for c, cid in calls]
        return {"id": f"chatcmpl-scripted-{number}", "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": usage, "system_fingerprint": "fp_scripted", "service_tier": "default"}
    if api == "responses":
        output: list[dict[str, Any]] = []
        if reply.text or reply.refusal:
            content = ([{"type": "refusal", "refusal": reply.refusal}] if reply.refusal else
                       [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}])
            output.append({"type": "message", "id": f"msg_scripted_{number}", "status": "completed",
                           "role": "assistant", "content": content})
        output.extend({"type": "function_call", "id": f"fc_scripted_{number}_{i}", "call_id": cid, "name": c.name,
                       "arguments": c.arguments_json(), "status": "completed"} for i, (c, cid) in enumerate(calls))
        incomplete = truncated or reply.finish_reason == "length"
        return {"id": f"resp_scripted_{number}", "object": "response", "created_at": created,
                "status": "incomplete" if incomplete else "completed", "error": None,
                "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
                "instructions": request.get("instructions"), "max_output_tokens": request.get("max_output_tokens"),
                "model": model, "output": output, "parallel_tool_calls": True, "previous_response_id": None,
                "reasoning": {"effort": None, "summary": None}, "store": False,
                "temperature": request.get("temperature", 1.0), "text": {"format": {"type": "text"}},
                "tool_choice": request.get("tool_choice", "auto"), "tools": request.get("tools", []),
                "top_p": request.get("top_p", 1.0), "truncation": "disabled", "usage": usage, "user": None,
                "metadata": {}}
    blocks: list[dict[str, Any]] = []
    if reply.text or reply.refusal:
        blocks.append({"type": "text", "text": reply.text or reply.refusal or ""})
    blocks.extend({"type": "tool_use", "id": cid.replace("call_", "toolu_", 1), "name": c.name,
                   "input": json.loads(c.arguments_json())} for c, cid in calls)
    if reply.refusal:
        stop = "refusal"
    elif truncated or reply.finish_reason == "length":
        stop = "max_tokens"
    else:
        stop = "tool_use" if calls else "end_turn"
    return {"id": f"msg_scripted_{number}", "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}
