"""A scripted LLM server on loopback: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages.

Point a real SDK (or a framework on top of one) at it and script what the "model" answers::

    with ScriptedLLMServer(["<summary>done</summary>"], context_window=8_000, validator="auto") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
        ...
        assert server.requests[0].body["max_tokens"] == 2_000
        assert not server.invalid_requests

It records every request, can enforce a small context window (answering with the provider's real error body), and
can check each request with a validator (by default the ``contextfold.formats`` validator of the API called).
Stdlib only: ``http.server`` in a daemon thread on 127.0.0.1, on a free port.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import import_module
from typing import Any, Literal

from ..summarize.base import default_counter
from ..tokens import TokenCounter
from .context_management import ContextManagement
from .stream import stream_events
from .wire import API, ErrorReply, Reply, count_media, error_body, reply_body, request_tokens

__all__ = ["RecordedRequest", "ScriptedLLMServer", "Validator", "formats_validator"]

ScriptedReply = str | Reply | ErrorReply
"""What the scripted model answers: text, a :class:`Reply` (tool calls, refusal), or an :class:`ErrorReply`."""

Validator = Callable[[API, Mapping[str, Any]], None]
"""Checks a request body; raises (any exception, its message is returned as a 400) when the API would reject it."""

# serve_forever notices shutdown() only between polls; a short poll keeps stopping a test server instant.
SHUTDOWN_POLL_SECONDS = 0.02
# A stream held by ``stream_pause`` goes on by itself after this long: a test that forgot to release it still ends.
STREAM_PAUSE_TIMEOUT_S = 10.0

_ROUTES: dict[str, API] = {"/v1/chat/completions": "chat", "/chat/completions": "chat", "/v1/responses": "responses",
                           "/responses": "responses", "/v1/messages": "messages", "/messages": "messages",
                           "/v1/responses/compact": "responses", "/responses/compact": "responses"}
# The contextfold.formats module that validates each API's items.
_FORMAT_OF: dict[API, str] = {"chat": "openai_chat", "responses": "openai_responses", "messages": "anthropic"}
# Whichever parameter the request used to cap its reply.
_MAX_TOKEN_KEYS: dict[API, tuple[str, ...]] = {"chat": ("max_completion_tokens", "max_tokens"),
                                               "responses": ("max_output_tokens",), "messages": ("max_tokens",)}


@dataclass(slots=True)
class RecordedRequest:
    """One request the server received, and what it answered."""

    number: int
    api: API
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    input_tokens: int = 0
    size: int | None = None
    status: int = 200
    invalid: str | None = None
    response: dict[str, Any] = field(default_factory=dict)

    @property
    def max_tokens(self) -> int | None:
        """The reply cap the request asked for, whatever the API calls it."""
        for key in _MAX_TOKEN_KEYS[self.api]:
            value = self.body.get(key)
            if isinstance(value, int):
                return value
        return None

    @property
    def items(self) -> list[Any]:
        """The conversation items sent: ``messages`` or ``input`` (a string input becomes one user item)."""
        raw = self.body.get("input") if self.api == "responses" else self.body.get("messages")
        if isinstance(raw, str):
            return [{"role": "user", "content": raw}]
        return list(raw or [])


def formats_validator(api: API, body: Mapping[str, Any]) -> None:
    """Validate a request's items with ``contextfold.formats.<format>.validate`` (raises InvalidHistory)."""
    module = import_module(f"contextfold.formats.{_FORMAT_OF[api]}")
    raw = body.get("input") if api == "responses" else body.get("messages")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
    module.validate(items)


def _formats_available() -> bool:
    try:
        for name in _FORMAT_OF.values():
            import_module(f"contextfold.formats.{name}")
    except ImportError:
        return False
    return True


class _Server(ThreadingHTTPServer):
    """The HTTP server, quiet about clients that went away (a cancelled stream, a pooled connection reset)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # (what a client's disconnect raises in its handler thread: not an error of the server)
        super().handle_error(request, client_address)


class ScriptedLLMServer:
    """A fake OpenAI/Anthropic endpoint on 127.0.0.1 answering from a script, for tests with the real SDKs.

    Args:
        replies: answers in order (text, :class:`Reply`, or :class:`ErrorReply`); see also :meth:`push`.
        handler: computes the answer from the request when the queue is empty (a callback script).
        default: the answer once both are exhausted; ``None`` answers a 500 saying the script ran out.
        context_window: when set, requests whose input exceeds it get the provider's real overflow error.
        validator: ``None``; ``"auto"`` (the ``contextfold.formats`` validators, when that package is present);
            ``"formats"`` (the same, required); or a callable ``(api, body) -> None`` that raises on invalid input.
        counter: the tokenizer input and output are counted with (default: the summarizer budget counter).
        model: reported when the request names none.
        truncate: cut replies longer than the request's max tokens, with the API's "length" finish reason.

    A request with ``"stream": true`` gets its reply as the API's server-sent events (``stream.py``).

    Attributes:
        requests: every :class:`RecordedRequest`, in arrival order.
        context_management: the providers' own context management as the server plays it (edits, compaction,
            signed reasoning; :mod:`contextfold.testing.context_management`), with the compactions it made.
    """

    def __init__(
        self,
        replies: Iterable[ScriptedReply] = (),
        *,
        handler: Callable[[RecordedRequest], ScriptedReply] | None = None,
        default: ScriptedReply | None = None,
        context_window: int | None = None,
        validator: Validator | Literal["auto", "formats"] | None = None,
        counter: TokenCounter | None = None,
        model: str = "scripted-model",
        truncate: bool = True,
        max_request_bytes: int | None = None,
        max_media: int | None = None,
    ) -> None:
        if validator == "formats" or (validator == "auto" and _formats_available()):
            self.validator: Validator | None = formats_validator
        elif validator == "auto":
            self.validator = None
        else:
            self.validator = validator if callable(validator) else None
        self._queue: deque[ScriptedReply] = deque(replies)
        self.handler = handler
        self.default = default
        self.context_window = context_window
        self.counter = counter or default_counter()
        self.model = model
        self.truncate = truncate
        # A provider's limits on a request's bytes (answered with 413 request_too_large) and on its images and
        # documents (answered with "Too much media"), as Anthropic enforces them.
        self.max_request_bytes = max_request_bytes
        self.max_media = max_media
        self.requests: list[RecordedRequest] = []
        # Set to an unset threading.Event to hold every stream after its first event until the test sets it.
        self.stream_pause: threading.Event | None = None
        # Set to N to end every stream cleanly after its first N events, as a proxy or a dropped upstream connection
        # does: the stream lacks its final events (a client must not take what it got for the whole reply).
        self.stream_cut_after: int | None = None
        self.context_management = ContextManagement(self.counter)
        self._changed = threading.Condition()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> ScriptedLLMServer:
        """Listen on a free loopback port and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        handler = type("_Handler", (_Handler,), {"scripted": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(SHUTDOWN_POLL_SECONDS,),
                                        name="ScriptedLLMServer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:54321`` (the Anthropic SDK's ``base_url``)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedLLMServer is not running: use it as a context manager or call start()")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """``url + "/v1"``: the OpenAI SDK's ``base_url``."""
        return f"{self.url}/v1"

    # -- scripting and inspection -------------------------------------------------------------------------------
    def push(self, *replies: ScriptedReply) -> None:
        """Append answers to the script."""
        with self._changed:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted answers not yet used."""
        with self._changed:
            return len(self._queue)

    @property
    def invalid_requests(self) -> list[RecordedRequest]:
        """Requests the validator rejected (a test of a correct client expects none)."""
        with self._changed:
            return [r for r in self.requests if r.invalid is not None]

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until ``count`` requests have been answered (for clients running in other threads)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.requests) >= count, timeout=timeout):
                raise TimeoutError(f"ScriptedLLMServer got {len(self.requests)} of {count} requests in {timeout} s")
            return list(self.requests)

    # -- answering ----------------------------------------------------------------------------------------------
    def _next_reply(self, request: RecordedRequest) -> ScriptedReply | None:
        with self._changed:
            if self._queue:
                return self._queue.popleft()
        if self.handler is not None:
            return self.handler(request)
        return self.default

    def answer(self, api: API, path: str, body: dict[str, Any], headers: dict[str, str], *,
               size: int | None = None) -> tuple[int, dict[str, Any]]:
        """Record one request and compute the status and body to send (the HTTP layer only writes them).

        ``size``: the request body's bytes, checked against ``max_request_bytes``.
        """
        with self._changed:
            number = len(self.requests) + 1
        request = RecordedRequest(number, api, path, body, headers, size=size)
        try:
            if self.max_request_bytes is not None and size is not None and size > self.max_request_bytes:
                request.invalid = f"rejected: {size} bytes > {self.max_request_bytes}"
                status, payload = error_body(api, ErrorReply.request_too_large(), number)
            else:
                status, payload = self._answer(request)
        except Exception as exc:  # a bug in a test's handler must show up as a 500, not a hung client
            status, payload = error_body(api, ErrorReply("server_error", f"ScriptedLLMServer handler failed: "
                                                                         f"{type(exc).__name__}: {exc}"), number)
        request.status, request.response = status, payload
        with self._changed:
            self.requests.append(request)
            self._changed.notify_all()
        return status, payload

    def _answer(self, request: RecordedRequest) -> tuple[int, dict[str, Any]]:
        api, body, number = request.api, request.body, request.number
        request.input_tokens = request_tokens(api, body, self.counter)
        if self.validator is not None:
            try:
                self.validator(api, body)
            except Exception as exc:  # every validator failure is reported to the client as the API would
                request.invalid = f"{type(exc).__name__}: {exc}"
                return error_body(api, ErrorReply("invalid_request", str(exc)), number)
        if request.path.endswith("/responses/compact"):
            return 200, self.context_management.compact_endpoint(body, number)
        if self.max_media is not None:
            images, documents = count_media(api, body)
            if images + documents > self.max_media:
                request.invalid = f"rejected: {images} images + {documents} documents > {self.max_media}"
                return error_body(api, ErrorReply.too_much_media(images, documents, self.max_media), number)
        admitted = self.context_management.admit(api, body, request.headers, request.input_tokens, number)
        if isinstance(admitted, ErrorReply):
            request.invalid = f"rejected: {admitted.message}"
            return error_body(api, admitted, number)
        request.input_tokens = admitted.input_tokens  # what the model reads, after the provider's own edits
        window = self.context_window
        if window is not None:
            cap = request.max_tokens or 0
            if request.input_tokens > window:
                return error_body(api, ErrorReply.overflow(request.input_tokens, window), number)
            if api == "messages" and request.input_tokens + cap > window:
                return error_body(api, ErrorReply("context_overflow", prompt_tokens=request.input_tokens,
                                                  limit=window, max_tokens=cap), number)
        scripted = self._next_reply(request)
        if scripted is None:
            return error_body(api, ErrorReply("server_error", f"ScriptedLLMServer: no scripted reply left for "
                                                              f"request {number}"), number)
        if isinstance(scripted, ErrorReply):
            return error_body(api, scripted, number)
        reply = Reply(text=scripted) if isinstance(scripted, str) else scripted
        reply, truncated = self._cut(reply, request.max_tokens)
        output = self.counter.count(reply.text or reply.refusal or "") + sum(
            self.counter.count(c.name) + self.counter.count(c.arguments_json()) for c in reply.tool_calls)
        model = body.get("model") if isinstance(body.get("model"), str) else self.model
        payload = reply_body(api, reply, model=str(model), number=number, input_tokens=request.input_tokens,
                             output_tokens=output, truncated=truncated, request=body)
        return 200, self.context_management.finish(admitted, payload, reply)

    def _cut(self, reply: Reply, max_tokens: int | None) -> tuple[Reply, bool]:
        """The reply cut to ``max_tokens`` as a real model would be, and whether it was cut."""
        if not self.truncate or max_tokens is None or not reply.text:
            return reply, False
        total = self.counter.count(reply.text)
        if total <= max_tokens:
            return reply, False
        text = reply.text[: len(reply.text) * max_tokens // total]
        while text and self.counter.count(text) > max_tokens:
            text = text[: len(text) * 9 // 10]
        return Reply(text=text, refusal=reply.refusal, input_tokens=reply.input_tokens, reasoning=reply.reasoning), True


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedLLMServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        api = _ROUTES.get(path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if api is None:
            self._send(404, {"error": {"message": f"Invalid URL (POST {path})", "type": "invalid_request_error",
                                       "param": None, "code": None}})
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the request body must be a JSON object")
        except ValueError as exc:
            status, payload = error_body(api, ErrorReply("invalid_request", f"We could not parse the JSON body of "
                                                                            f"your request: {exc}"), 0)
            self._send(status, payload)
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, payload = self.scripted.answer(api, path, body, headers, size=length)
        if status == 200 and body.get("stream") is True:
            self._stream(stream_events(api, payload, body))
        else:
            self._send(status, payload)

    def _stream(self, events: list[bytes]) -> None:
        """Server-sent events in chunked encoding; a test's ``stream_pause`` holds the stream after its first event."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        pause = self.scripted.stream_pause
        cut = self.scripted.stream_cut_after
        for number, event in enumerate(events if cut is None else events[:cut]):
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
            if number == 0 and pause is not None:
                pause.wait(STREAM_PAUSE_TIMEOUT_S)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send(self, status: int, payload: Mapping[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        # Tell the SDKs not to retry scripted errors: a test scripts each attempt it wants.
        if status >= 400:
            self.send_header("x-should-retry", "false")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep test output clean; every request is in ScriptedLLMServer.requests
