"""The ASGI application: routes, the life of one proxied request, health, readiness and metrics.

One request (:meth:`ServeApp.proxy`): read the body (size-limited), find the caller's scope and the session, take
the session's lock on this instance, run the session's turn on a worker thread (load, feed, prepare, save), send
the view upstream with the caller's own key, and answer with what the upstream said: as it arrives when
streaming. A context-length error from the upstream is recovered here (the view shrinks, the state is saved, the
call is made again) and the client never sees it unless recovery gives up.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..errors import ContextfoldError, InsufficientBudget, MissingExtra, RecoveryFailed, StoreError
from ..formats._common import json_problem

try:
    import httpx
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # the proxy's stack is an extra
    raise MissingExtra("contextfold serve", "serve", module=exc.name) from exc
from .apis import (
    ApiName,
    BadRequest,
    Exchange,
    caller_wants_usage,
    item_key,
    parse_request,
    reply_items,
    reply_usage,
    upstream_body,
)
from .config import ServeConfig
from .identity import (
    MAX_SESSION_NAME,
    SESSION_HEADER,
    TOKEN_HEADER,
    caller_key,
    caller_scope,
    opening_fingerprint,
    session_id,
    token_matches,
)
from .leases import LEASE_MARGIN_S, Lease, take_lease
from .ops import LogRedactorScope, Metrics, lines_to_the_applications_handlers, log_event
from .replies import ReplyCollector
from .retrieval import (
    MAX_ROUNDS,
    RoundRelay,
    Split,
    answer,
    client_payload,
    proxy_tool_names,
    split_reply,
    with_tools,
)
from .sessions import (
    Backend,
    Conflict,
    Turn,
    add_round,
    continuation_tag,
    follow_forks,
    open_turn,
    resolve_pointer,
    save_reply,
    session_marks,
)
from .sse import _MAX_EVENT_BYTES, SseEvent, SseSplitter, encode_event, events
from .upstream import Upstream, UpstreamError, error_body, response_headers

if TYPE_CHECKING:
    from ..recovery import OverflowRecovery
    from ..stores.session import SessionState

__all__ = ["ServeApp", "create_app"]


# The id of the entry readiness reads: any store answering for it is up.
_READY_PROBE = "px-readiness-probe"
# Routes of each API: with and without the /v1 prefix, as SDKs build them from a base URL either way.
_API_PATHS: dict[ApiName, tuple[str, ...]] = {
    "chat": ("/v1/chat/completions", "/chat/completions"),
    "responses": ("/v1/responses", "/responses"),
    "messages": ("/v1/messages", "/messages"),
}


class BodyTooLarge(Exception):
    """The request body is over ``max_body_bytes``."""


class _LinesAtFirstCall:
    """ASGI middleware: a request to an app whose lifespan never ran (mounted in another) starts its log writer."""

    def __init__(self, app: Any, serve: ServeApp) -> None:
        self.app = app
        self.serve = serve

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Start the writer at the first HTTP request when no lifespan did; pass the call on."""
        if scope["type"] == "http" and not self.serve._lines_started:
            self.serve._start_lines(at_first_request=True)
        await self.app(scope, receive, send)


def _stop_at_exit(serve: weakref.ref[ServeApp]) -> None:
    """At the interpreter's exit: the lines an app started at its first request queued are written."""
    alive = serve()
    if alive is not None:
        alive.stop_lines()


class SessionLocks:
    """One asyncio lock per session on this instance: its requests take turns here instead of conflicting."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    async def acquire(self, key: str) -> Callable[[], None]:
        """Wait for the session's lock; returns the function that releases it (call it once)."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            self._forget(key)
            raise
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                lock.release()
                self._forget(key)

        return release

    def _forget(self, key: str) -> None:
        lock, users = self._locks[key]
        if users <= 1:
            del self._locks[key]
        else:
            self._locks[key] = (lock, users - 1)


class ServeApp:
    """The proxy: a Starlette application (``.app``) over one :class:`Backend` and one upstream client.

    Args:
        config: The proxy's settings.
        backend: The stores (built from ``config`` when not given).
        transport: An httpx transport for the upstream calls (tests; None for the network).
    """

    def __init__(self, config: ServeConfig, *, backend: Backend | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.metrics = Metrics()
        self.backend = backend if backend is not None else Backend(config)
        self.upstream = Upstream(config, transport)
        self.locks = SessionLocks()
        self.redactor = config.redactor(log_lines=True)  # (log lines: always redacted, with the operator's patterns)
        self.draining = False
        routes = [Route(path, self._endpoint(api), methods=["POST"])
                  for api, paths in _API_PATHS.items() for path in paths]
        routes += [Route("/healthz", self.health, methods=["GET"]), Route("/readyz", self.ready, methods=["GET"]),
                   Route("/metrics", self.metrics_endpoint, methods=["GET"]),
                   Route("/{path:path}", self.passthrough, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])]
        # The log writer (serve.ops): started by the lifespan, or by the first request if none ran (_LinesAtFirstCall).
        self._lines_lock = threading.Lock()
        self._lines_started = False
        self._stop_lines: Callable[[], None] | None = None
        self.app = Starlette(routes=routes, lifespan=self.lifespan,
                             middleware=[Middleware(LogRedactorScope, redactor=self.redactor),
                                         Middleware(_LinesAtFirstCall, serve=self)])

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any = None) -> AsyncIterator[None]:
        """The proxy's start and stop: its log writer, then, at the stop, draining and :meth:`aclose`.

        Starlette runs it for ``.app`` served on its own. A host application that mounts ``.app`` runs no lifespan of
        a mounted app: it may run this one inside its own (``async with serve_app.lifespan(app): yield``); without it
        the writer starts at the first request, and the host's stop should await :meth:`aclose`.
        """
        self._start_lines()
        try:
            yield
        finally:
            self.draining = True
            await self.aclose()

    def _start_lines(self, *, at_first_request: bool = False) -> None:
        """Start the writer that hands the lines, redacted and off the loop, to an application's handlers (once).

        (an application that did not call configure_logging: ops.lines_to_the_applications_handlers.) A mounted app
        has no lifespan: without this at its first request, every line went to the host's handlers on the event loop,
        unredacted (s19's "noticed"). Its stop then comes with :meth:`aclose`, or at the interpreter's exit.
        """
        with self._lines_lock:
            if self._lines_started:
                return
            self._lines_started = True
            self._stop_lines = lines_to_the_applications_handlers(self.redactor)
        if at_first_request and self._stop_lines is not None:
            atexit.register(_stop_at_exit, weakref.ref(self))
        started: dict[str, Any] = {"started": "at the first request (no lifespan ran: mounted?)"} \
            if at_first_request else {}
        log_event("serving", host=self.config.host, port=self.config.port, sessions=self.config.sessions,
                  openai=self.config.openai_base_url, anthropic=self.config.anthropic_base_url, **started)

    def stop_lines(self) -> None:
        """Stop the log writer (the lines queued are written first); a no-op when none runs."""
        with self._lines_lock:
            stop, self._stop_lines = self._stop_lines, None
        if stop is not None:
            stop()

    async def aclose(self) -> None:
        """Close the upstream pool and the stores, then stop the log writer (its queued lines written)."""
        try:
            await self.upstream.aclose()
            await asyncio.to_thread(self.backend.close)
        finally:
            await asyncio.to_thread(self.stop_lines)

    # -- plumbing -----------------------------------------------------------------------------------------------
    def _endpoint(self, api: ApiName) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await self.proxy(api, request)

        return endpoint

    def _denied(self, request: Request) -> bool:
        token = self.config.token
        if token is None:
            return False
        sent = request.headers.get(TOKEN_HEADER)
        if sent is None and request.url.path == "/metrics":  # Prometheus sends a bearer token
            auth = request.headers.get("authorization", "")
            sent = auth[7:] if auth[:7].lower() == "bearer " else None
        return not token_matches(sent, token)

    async def _body(self, request: Request) -> bytes:
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            chunks.append(chunk)
        return b"".join(chunks)

    async def _error(self, api: ApiName, status: int, message: str, *, param: str | None = None,
                     kind: str = "invalid_request_error", started: float | None = None,
                     session: str | None = None, ours: bool = False) -> Response:
        """The API's error response, logged. ``ours``: the message quotes nothing of the client (a 401, a 413)."""
        self.metrics.requests.labels(api, str(status)).inc()
        ms = round((time.perf_counter() - started) * 1000, 1) if started else None
        if ours:  # (queued as it is, no thread: a flood of 401s, which need no token, took the pool's threads)
            log_event("refused", level=logging.WARNING, api=api, status=status, ms=ms, problem=message)
        else:
            await self._log_redacted("refused", logging.WARNING, session, "problem", message, api=api,
                                     status=status, ms=ms)
        return JSONResponse(error_body(api, message, kind=kind, param=param), status_code=status)

    async def _log_redacted(self, message: str, level: int, secrets_of: str | None, field: str, text: str,
                            **fields: Any) -> None:
        """A log line whose ``field`` is ``text`` redacted (:meth:`_redacted`), written in a thread.

        ``text`` quotes the client (a refused id, a value it sent): the operator's patterns scan it, each within its
        time limit, and the memory of session ``secrets_of`` is read from the store. On the event loop, a pattern that
        backtracks held every request of the instance that long, per refused request (reviewer 2, s17).
        """
        def write() -> None:
            log_event(message, level=level, **fields, **{field: self._redacted(text, secrets_of)})

        await asyncio.to_thread(write)

    def _redacted(self, text: str, session: str | None) -> str:
        """``text`` for a log line: the built-in patterns, and the secrets ``session`` remembers when it is known.

        A value a session learned in context (``password: X``) matches no pattern bare; a request of that session
        that quotes it where the proxy refuses it would log it in clear (issue 21). Refusals are rare: the memory is
        read from the store each time (one blob), so a value another instance learned is known too.
        """
        if session is None or not self.config.redact:
            return self.redactor.redact_text(text)
        from ..redact import SecretMemory

        try:
            return self.redactor.for_session(SecretMemory(self.backend.blobs, session)).redact_text(text)
        except Exception:  # (the store is down: the built-in patterns still run)
            return self.redactor.redact_text(text)

    # -- health -------------------------------------------------------------------------------------------------
    async def health(self, _request: Request) -> Response:
        """Liveness: the process answers."""
        return JSONResponse({"status": "ok"})

    async def ready(self, _request: Request) -> Response:
        """Readiness: not draining, and the session store answers."""
        if self.draining:
            return JSONResponse({"status": "draining"}, status_code=503)
        try:
            await asyncio.to_thread(self.backend.sessions.load_state, _READY_PROBE)
        except Exception as exc:  # any failure of the store means "do not send traffic here"
            return JSONResponse({"status": "unavailable", "reason": f"session store: {type(exc).__name__}"},
                                status_code=503)
        return JSONResponse({"status": "ready"})

    async def metrics_endpoint(self, request: Request) -> Response:
        """Prometheus exposition (behind the token when one is set)."""
        if self._denied(request):
            return JSONResponse({"error": "missing or wrong token"}, status_code=401)
        data, content_type = self.metrics.render()
        return Response(data, media_type=content_type)

    async def passthrough(self, request: Request) -> Response:
        """Any other path the SDKs call, forwarded to the provider as it is (no session is involved)."""
        api: ApiName = "messages" if "/messages" in request.url.path else "chat"
        started = time.perf_counter()
        if self._denied(request):
            return await self._error(api, 401, f"this proxy needs its token in the {TOKEN_HEADER} header",
                                     kind="authentication_error", started=started, ours=True)
        try:
            content = await self._body(request)
        except BodyTooLarge:
            return await self._error(api, 413, f"the request body is over the proxy's limit of "
                                               f"{self.config.max_body_bytes} bytes", started=started, ours=True)
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            upstream = await self.upstream.forward(request.method, request.url.path, request.url.query, content,
                                                   headers)
        except httpx.HTTPError as exc:
            return await self._error(api, 502, f"the upstream could not be reached: {type(exc).__name__}",
                                     kind="api_error", started=started)
        try:
            data = await upstream.aread()
        finally:
            await upstream.aclose()
        self.metrics.requests.labels("passthrough", str(upstream.status_code)).inc()
        return Response(data, status_code=upstream.status_code, headers=response_headers(upstream))

    # -- one request --------------------------------------------------------------------------------------------
    async def proxy(self, api: ApiName, request: Request) -> Response:
        """Serve one request of ``api``."""
        started = time.perf_counter()
        if self._denied(request):
            return await self._error(api, 401, f"this proxy needs its token in the {TOKEN_HEADER} header",
                                     kind="authentication_error", started=started, ours=True)
        try:
            body = json.loads(await self._body(request))
            exchange = parse_request(api, body)
        except BodyTooLarge:
            return await self._error(api, 413, f"the request body is over the proxy's limit of "
                                               f"{self.config.max_body_bytes} bytes", started=started, ours=True)
        except BadRequest as exc:
            return await self._error(api, 400, str(exc), param=exc.field, started=started)
        except (ValueError, RecursionError) as exc:  # (RecursionError: arrays nested past the JSON reader's depth)
            problem = json_problem(exc).removeprefix("invalid JSON: ")
            return await self._error(api, 400, f"body: not valid JSON ({problem})", started=started)
        headers = {k.lower(): v for k, v in request.headers.items()}
        scope = caller_scope(caller_key(headers), self.config.key_salt)
        try:
            session, continues, loaded = await self._session_of(exchange, headers, scope)
        except BadRequest as exc:
            return await self._error(api, 400, str(exc), param=exc.field, started=started)
        except StoreError as exc:  # (finding the session reads the store: a response's pointer, an opening's forks)
            return await self._error(api, 503, f"the session store is unavailable: {exc}", kind="api_error",
                                     started=started)
        except Exception as exc:  # a bug here must reach the client as its API's error too, not as Starlette's text
            await self._log_redacted("internal error", logging.ERROR, None, "error", f"{type(exc).__name__}: {exc}",
                                     api=api)
            return await self._error(api, 500, f"contextfold serve: internal error ({type(exc).__name__})",
                                     kind="api_error", started=started)
        held = _Held(await self.locks.acquire(session), session)
        handed_over = False
        try:
            response = await self._turn(exchange, headers, scope, session, continues, started, held, loaded)
            handed_over = isinstance(response, StreamingResponse)
            return response
        except Exception as exc:  # a bug must reach the client as its API's error and the log, never as a hang
            await self._log_redacted("internal error", logging.ERROR, session, "error",
                                     f"{type(exc).__name__}: {exc}", api=api, session=session)
            return await self._error(api, 500, f"contextfold serve: internal error ({type(exc).__name__})",
                                     kind="api_error", started=started)
        finally:
            if not handed_over:
                await held.release()

    async def _session_of(self, exchange: Exchange, headers: dict[str, str],
                          scope: str) -> tuple[str, str | None, SessionState | None]:
        """The session id of the request, the response id it continues (Responses), and its state if loaded."""
        named = headers.get(SESSION_HEADER)
        continues: str | None = None
        if exchange.handle is not None and exchange.handle[0] == "response":
            continues = exchange.handle[1]
        if named:
            if len(named) > MAX_SESSION_NAME:
                raise BadRequest(f"at most {MAX_SESSION_NAME} characters", SESSION_HEADER)
            return session_id(scope, "header", named), continues, None
        if exchange.handle is not None:
            kind, handle = exchange.handle
            if kind == "conversation":
                return session_id(scope, "conversation", handle), None, None
            found = await asyncio.to_thread(resolve_pointer, self.backend, session_id(scope, "response", handle))
            if found is None:
                raise BadRequest(f"the proxy gave no response {handle!r} to this caller (it continues only "
                                 "responses it served)", "previous_response_id")
            return found, continues, None
        head = [{"role": "system", "content": exchange.instructions}] if exchange.instructions else []
        opening = session_id(scope, "opening", opening_fingerprint([*head, *exchange.items]))
        forked, state = await asyncio.to_thread(follow_forks, self.backend, opening, exchange,
                                               lambda name: session_id(scope, "fork", name), _tail_id(scope))
        return forked, None, state

    async def _turn(self, exchange: Exchange, headers: dict[str, str], scope: str, session: str,
                    continues: str | None, started: float, held: _Held,
                    loaded: SessionState | None = None) -> Response:
        api = exchange.api
        try:
            tail_id = None if loaded is None else _tail_id(scope)  # (loaded by _session_of: named by its opening)
            if exchange.handle is not None:  # (continuing a response or a conversation: serve.leases)
                feeds_on = continues
                if continues is None:
                    # A conversation's request feeds on the session's head: its lease is tagged as its fed mark will
                    # be, which tells it from the previous request's when it repeats that one's input. The state is
                    # the feed's first attempt (one load: a save refused as stale loads again).
                    loaded = await asyncio.to_thread(self.backend.sessions.load_state, session)
                    feeds_on = loaded.marks.get("head")
                await held.take(functools.partial(
                    take_lease, self.backend.leases, session, continues,
                    continuation_tag(feeds_on, [item_key(item) for item in exchange.items]),
                    seconds=self.config.upstream_timeout_s + LEASE_MARGIN_S, clock=self.backend.clock,
                    marks=functools.partial(session_marks, self.backend, session)))
            retag = held.lease.retag if continues is None and held.lease is not None else None  # (serve.leases)
            turn = await asyncio.to_thread(open_turn, self.backend, exchange, session, continues=continues,
                                           loaded=loaded, tail_id=tail_id, retag=retag)
        except Conflict as exc:
            return await self._error(api, 409, str(exc), param=exc.field, started=started, session=session)
        except BadRequest as exc:
            return await self._error(api, 400, str(exc), param=exc.field, started=started, session=session)
        except InsufficientBudget as exc:
            return await self._error(api, 400, f"contextfold cannot fit this conversation in the window: {exc}",
                                     started=started, session=session)
        except StoreError as exc:
            return await self._error(api, 503, f"the session store is unavailable: {exc}", kind="api_error",
                                     started=started, session=session)
        self._count_turn(turn, started)
        from ..recovery import OverflowRecovery

        recovery = OverflowRecovery(turn.cm, self.config.recovery_retries, exchange.reply_tokens)
        try:
            upstream, overflow = await self._send_recovering(turn, turn.sent, headers, recovery, held)
        except httpx.HTTPError as exc:
            return await self._error(api, 502, f"the upstream could not be reached: {type(exc).__name__}",
                                     kind="api_error", started=started, session=session)
        if upstream.status_code >= 400:
            self.metrics.requests.labels(api, str(upstream.status_code)).inc()
            log_event("upstream error", level=logging.WARNING, api=api, session=session,
                      status=upstream.status_code, overflow=overflow)
            return Response(upstream.content, status_code=upstream.status_code, headers=response_headers(upstream))
        if exchange.stream:
            return _RelayResponse(self._relay(turn, upstream, headers, scope, started, held, recovery),
                                  upstream, held.release, status_code=upstream.status_code, headers={
                                      **response_headers(upstream), "cache-control": "no-cache",
                                      "x-accel-buffering": "no"})
        try:
            data = await upstream.aread()
        finally:
            await upstream.aclose()
        payload = _json_or_text(data)
        if isinstance(payload, dict):
            if self.config.retrieval_tools:
                try:
                    payload = await self._retrieval_rounds(turn, payload, headers, recovery, held)
                except httpx.HTTPError as exc:  # (a retrieval round's call: unreachable as the first can be)
                    return await self._error(api, 502, f"the upstream could not be reached: {type(exc).__name__}",
                                             kind="api_error", started=started, session=session)
                except _RoundFailed as failed:
                    if failed.response is None:
                        return await self._error(api, 400, failed.body["error"]["message"], started=started,
                                                 session=session)
                    self.metrics.requests.labels(api, str(failed.response.status_code)).inc()
                    return Response(failed.response.content, status_code=failed.response.status_code,
                                    headers=response_headers(failed.response))
                data = json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")
            await self._after_reply(turn, scope, reply_usage(payload), payload.get("id"),
                                    reply_items(api, payload), held)
        self._done(turn, upstream.status_code, started)
        return Response(data, status_code=upstream.status_code, headers=response_headers(upstream))

    async def _send_recovering(self, turn: Turn, view: Any, headers: dict[str, str], recovery: OverflowRecovery,
                               held: _Held) -> tuple[httpx.Response, bool]:
        """Send ``view`` upstream; after a context-length error, shrink the session's view and send it again.

        For the request's first call and for every retrieval round after it (a round adds the answers to the view,
        so it is where a provider limit below the window is met first). Returns the upstream's response (a
        success still unread, or the error it ended with, read and closed) and whether that error is an overflow
        recovery gave up on. Raises httpx.HTTPError when the upstream cannot be reached. A call renews the
        request's lease when it is due (serve.leases: a request can last longer than one).
        """
        from ..recovery import parse_limit_error

        api, provider = turn.exchange.api, turn.exchange.provider
        while True:
            if held.renewal_due():
                await held.renew()
            sent_at = time.perf_counter()
            upstream = await self.upstream.send(api, self._upstream_body(turn, view), headers)
            self.metrics.upstream_seconds.labels(api).observe(time.perf_counter() - sent_at)
            if upstream.status_code < 400:
                upstream, body = await _error_of_success(upstream, turn.exchange.stream)
                if body is None:
                    return upstream, False
                error = UpstreamError(upstream.status_code, body, provider)
            else:
                data = await upstream.aread()
                await upstream.aclose()
                error = UpstreamError(upstream.status_code, _json_or_text(data), provider)
            info = parse_limit_error(error, provider=provider)
            if info is None:
                return upstream, False
            try:
                await asyncio.to_thread(recovery.shrink, info, error)
            except (RecoveryFailed, ContextfoldError):
                self.metrics.recoveries.labels(api, "failed").inc()
                return upstream, True
            try:
                view = await asyncio.to_thread(self._resave, turn)
            except InsufficientBudget:
                # What the error taught leaves no room for what must stay (pinned messages, the latest request,
                # the tools): the conversation does not fit, as the provider said; the client gets its error.
                self.metrics.recoveries.labels(api, "failed").inc()
                return upstream, True
            self.metrics.recoveries.labels(api, "retried").inc()

    def _upstream_body(self, turn: Turn, view: Any) -> dict[str, Any]:
        body = upstream_body(turn.exchange, view)
        if self.config.retrieval_tools:
            body = with_tools(turn.exchange.api, turn.exchange.format, body, turn.cm)
        return body

    def _record_round(self, turn: Turn, calls: list[tuple[str, str, Any]]) -> Any:
        """Answer retrieval calls from the session, record them with their results, and the next view."""
        from ..formats import get_format

        split = Split(calls=calls)
        answers = [answer(turn.cm, name, arguments, call_id) for call_id, name, arguments in calls]
        for _call_id, name, _arguments in calls:
            self.metrics.retrieval_calls.labels(name).inc()
        # (Named as the request's newest item's: they leave the view when the client drops it, serve.provenance.)
        round_messages = get_format(turn.exchange.format).decode(split.internal(turn.exchange.api, answers))
        add_round(turn, round_messages)
        return self._resave(turn)

    async def _retrieval_rounds(self, turn: Turn, payload: dict[str, Any], headers: dict[str, str],
                                recovery: OverflowRecovery, held: _Held) -> dict[str, Any]:
        """Answer the model's retrieval calls and ask again until the reply is the client's (non-streaming)."""
        api = turn.exchange.api
        for _ in range(MAX_ROUNDS):
            try:
                split = split_reply(api, reply_items(api, payload), proxy_tool_names(turn.exchange.body))
            except (TypeError, ValueError, AttributeError, KeyError):
                return payload  # (a reply of a shape the proxy cannot read is the client's, as it came)
            if not split.calls:
                return payload
            try:
                view = await asyncio.to_thread(self._record_round, turn, split.calls)
            except InsufficientBudget as exc:
                raise _RoundFailed(None, error_body(api, f"contextfold cannot fit this conversation in the window "
                                                         f"with the retrieval results: {exc}")) from exc
            if split.for_client:
                return client_payload(api, payload, split)
            upstream, _ = await self._send_recovering(turn, view, headers, recovery, held)
            try:
                data = await upstream.aread()
            finally:
                await upstream.aclose()
            following = _json_or_text(data)
            if upstream.status_code >= 400 or not isinstance(following, dict):
                log_event("retrieval round failed", level=logging.WARNING, api=api, session=turn.session_id,
                          status=upstream.status_code)
                if upstream.status_code >= 400:
                    # Without this round the reply has nothing for the client (only calls it never sees): the
                    # client gets the upstream's error, and its SDK retries or reports it.
                    raise _RoundFailed(upstream)
                return client_payload(api, payload, split)
            payload = following
        return client_payload(api, payload,
                              split_reply(api, reply_items(api, payload), proxy_tool_names(turn.exchange.body)))

    def _resave(self, turn: Turn) -> Any:
        """The view after recovery shrank it, saved so that the next request starts from it."""
        from ..stores.session import SessionConflict

        view = turn.view()
        try:
            turn.version = self.backend.sessions.save(turn.session_id, turn.cm.stored_messages(), turn.version,
                                                      marks=turn.marks)
        except SessionConflict:
            # Another request saved the session meanwhile: it holds a state as valid as ours (the archive has
            # what recovery dropped). This request goes on with its view; the next one starts from the store.
            self.metrics.conflicts.inc()
        return view

    def _count_turn(self, turn: Turn, started: float) -> None:
        api = turn.exchange.api
        self.metrics.prepare_seconds.labels(api).observe(time.perf_counter() - started)
        self.metrics.conflicts.inc(turn.conflicts)
        if turn.rebuilt:
            self.metrics.rebuilds.inc()
        self.metrics.compactions.labels(api).inc(max(0, turn.cm.compactions - turn.compactions_before))
        self.metrics.maskings.labels(api).inc(max(0, turn.cm.maskings - turn.maskings_before))
        sent = turn.cm.tokens()
        self.metrics.tokens_sent.labels(api).inc(sent)
        self.metrics.tokens_saved.labels(api).inc(max(0, int(turn.marks.get("client_tokens", "0")) - sent))

    async def _after_reply(self, turn: Turn, scope: str, usage: Any, response_id: Any,
                           items: list[dict[str, Any]], held: _Held) -> None:
        """Record the usage; for Responses, remember the reply so that a continuation of it finds its session.

        A continuation that lost its lease meanwhile (serve.leases) does not make its reply the session's head: the
        session went on under the request that took the lease over. Its pointer is still written (a continuation of
        it is then refused as not the latest, naming the head, rather than as a response the proxy never gave).
        """
        api = turn.exchange.api
        recorded = None
        if usage:
            try:
                recorded = await asyncio.to_thread(turn.cm.record_usage, usage)
            except (ValueError, TypeError):
                recorded = None  # a usage shape the parser does not know: nothing to ground the count in
            if recorded is not None:
                self.metrics.usage.labels(api, "input").inc(recorded.input)
                self.metrics.usage.labels(api, "output").inc(recorded.output)
        continuable = api == "responses" and isinstance(response_id, str) and bool(response_id)
        heads = continuable and await held.still_held()
        try:
            await asyncio.to_thread(
                save_reply, self.backend, turn, prompt_tokens=recorded.prompt_tokens if recorded else None,
                response_id=response_id if heads else None, items=items if heads else (),
                pointer=session_id(scope, "response", response_id) if continuable else None)
        except StoreError as exc:
            log_event("reply not remembered", level=logging.WARNING, api=api, session=turn.session_id,
                      error=type(exc).__name__)

    def _done(self, turn: Turn, status: int, started: float) -> None:
        api = turn.exchange.api
        self.metrics.requests.labels(api, str(status)).inc()
        log_event("served", api=api, session=turn.session_id, model=turn.exchange.model, status=status,
                  stream=turn.exchange.stream, fresh=turn.fresh, rebuilt=turn.rebuilt, attempts=turn.attempts,
                  compactions=turn.cm.compactions - turn.compactions_before,
                  ms=round((time.perf_counter() - started) * 1000, 1))

    async def _relay(self, turn: Turn, upstream: httpx.Response, headers: dict[str, str], scope: str,
                     started: float, held: _Held, recovery: OverflowRecovery) -> AsyncIterator[bytes]:
        """Pass the upstream's events through as they arrive; read the usage and the reply on the way.

        With the retrieval tools, rounds that only call them are answered here and followed by the next round's
        events in the same stream (:class:`~contextfold.serve.retrieval.RoundRelay`).
        """
        exchange = turn.exchange
        api = exchange.api
        collector = ReplyCollector(api)
        relay = RoundRelay(api, proxy_tool_names(exchange.body)) if self.config.retrieval_tools else None
        drop_usage = api == "chat" and not caller_wants_usage(exchange)
        status = upstream.status_code
        try:
            for _ in range(MAX_ROUNDS + 1):
                async for event in events(upstream.aiter_bytes()):
                    if held.renewal_due():  # (a stream can last longer than the lease: serve.leases)
                        await held.renew()
                    data = event.json()
                    collector.observe(data)
                    if drop_usage and isinstance(data, dict) and not data.get("choices") and data.get("usage"):
                        continue  # the usage chunk the proxy asked for on its own account
                    if relay is None:
                        yield event.raw
                    else:
                        for chunk in relay.feed(event):
                            yield chunk
                await upstream.aclose()
                if relay is None or not relay.end_round():
                    break
                relay.closing()  # (the round's closing events: dropped, another round follows)
                try:
                    view = await asyncio.to_thread(self._record_round, turn, relay.calls)
                except InsufficientBudget as exc:
                    self.metrics.requests.labels(api, "400").inc()
                    yield encode_event(error_body(api, f"contextfold cannot fit this conversation in the window "
                                                       f"with the retrieval results: {exc}"), "error")
                    return
                try:
                    following, _ = await self._send_recovering(turn, view, headers, recovery, held)
                except httpx.HTTPError as exc:  # (the stream has begun: its last event says so, as for an error)
                    self.metrics.requests.labels(api, "502").inc()
                    yield encode_event(error_body(api, f"the upstream could not be reached: {type(exc).__name__}",
                                                  kind="api_error"), "error")
                    return
                if following.status_code >= 400:
                    # The client's reply is not complete without this round: it gets the upstream's error as its
                    # stream's last event (its SDK raises it), not a reply ending in tool calls it never sees.
                    body = _json_or_text(await following.aread())
                    await following.aclose()
                    log_event("retrieval round failed", level=logging.WARNING, api=api, session=turn.session_id,
                              status=following.status_code)
                    self.metrics.requests.labels(api, str(following.status_code)).inc()
                    yield encode_event(_error_payload(api, following.status_code, body), "error")
                    return
                upstream = following
                relay.next_round()
                collector = ReplyCollector(api)
            if relay is not None:
                for chunk in relay.closing():
                    yield chunk
            items = collector.items()
            if relay is not None and api != "chat":
                items = split_reply(api, items, relay.names).client_items
            response_id = relay.response_id if relay is not None and relay.response_id else collector.response_id
            if not collector.finished or collector.unreadable:
                # The upstream's stream ended before its final event (a dropped connection), or held an event the
                # proxy could not read: what was collected is not the reply, so it is not the session's head (a
                # continuation of it would miss the reply).
                log_event("stream ended before its final event" if not collector.finished else
                          "stream held an event the proxy could not read", level=logging.WARNING, api=api,
                          session=turn.session_id)
                response_id, items = None, []
            await self._after_reply(turn, scope, collector.usage, response_id, items, held)
            self._done(turn, status, started)
        finally:
            await upstream.aclose()
            await held.release()


class _RelayResponse(StreamingResponse):
    """A relayed stream that gives the session's lock back and closes the upstream however the client goes.

    The relay releases both in its own ``finally``, but a generator that never started never runs it: a client
    that disconnects before the first event (its ``http.response.start`` fails) left the session's lock held for
    good, and every later request of that session on this instance waited forever.
    """

    def __init__(self, content: AsyncIterator[bytes], upstream: httpx.Response,
                 release: Callable[[], Awaitable[None]], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._relay_iterator = content
        self._upstream = upstream
        self._release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self._relay_iterator, "aclose", None)
            if aclose is not None:
                await aclose()  # (a relay that started ends through its own finally; one that never did, not at all)
            await self._upstream.aclose()
            await self._release()  # (once: a second call does nothing)


class _Held:
    """What a request holds of its session until its reply is recorded (or its call failed).

    The instance's lock, and for a request continuing a response or a conversation the session's lease (serve.leases),
    taken after the lock and given back before it.
    """

    def __init__(self, unlock: Callable[[], None], session: str | None = None) -> None:
        self.unlock = unlock
        self.session = session
        self.lease: Lease | None = None
        self._released = False

    async def take(self, take: Callable[[], Lease]) -> None:
        """Take the lease by ``take`` (a store's round trips, in a thread); raises what it raises.

        A request cancelled meanwhile (its client gone, the server shutting down) cannot stop the thread: the lease
        it takes then is given back when it is (it was never recorded here, and stayed closed until its expiry).
        """
        taking = asyncio.get_running_loop().run_in_executor(None, take)
        try:
            self.lease = await asyncio.shield(taking)
        except asyncio.CancelledError:
            taking.add_done_callback(_give_back_taken)
            raise

    def renewal_due(self) -> bool:
        """Whether the lease is held and due for renewal (a clock read: called at every relayed event)."""
        return self.lease is not None and not self._released and self.lease.due()

    async def renew(self) -> None:
        """Renew the lease if one is held (serve.leases: a request renews it when due, at a call or an event).

        A renewal that finds the hold taken over (the request stalled past the lease's time) is logged, once.
        """
        lease = self.lease
        if lease is None or self._released or lease.lost:
            return
        await asyncio.to_thread(lease.renew)
        if lease.lost:
            log_event("lease lost", level=logging.WARNING, session=self.session,
                      problem="the request outlived its lease (no call or event renewed it in time) and another "
                              "request took it over: its reply is not recorded as the session's")

    async def still_held(self) -> bool:
        """Whether the request may still record its reply as the session's: it holds no lease, or still holds it.

        Renewed first when due: a hold not due for renewal has most of its time left, so no other request can take
        it over before the reply is recorded; one due is renewed, which finds it gone if it was taken over.
        """
        if self.lease is None:
            return True
        if self.lease.due():
            await self.renew()
        return not self.lease.lost

    async def release(self) -> None:
        """Give both back (once: a second call does nothing); the lock even when the store cannot be reached."""
        if self._released:
            return
        self._released = True
        try:
            if self.lease is not None:
                await asyncio.to_thread(self.lease.release)
        except Exception as exc:  # (it expires; the request's answer stands)
            log_event("lease not given back", level=logging.WARNING, error=type(exc).__name__)
        finally:
            self.unlock()


def _give_back_taken(taking: asyncio.Future[Lease]) -> None:
    """Give back a lease taken for a request cancelled while it was being taken (in a thread: store round trips)."""
    if taking.cancelled() or taking.exception() is not None:
        return
    threading.Thread(target=taking.result().release, name="contextfold-lease-give-back").start()


class _RoundFailed(Exception):
    """A retrieval round that could not be made: its error goes to the client instead of the reply.

    The upstream's response (read), or the proxy's own error ``body`` when there is none.
    """

    def __init__(self, response: httpx.Response | None, body: dict[str, Any] | None = None) -> None:
        super().__init__(response.status_code if response is not None else body)
        self.response = response
        self.body: dict[str, Any] = body or {}


def _tail_id(scope: str) -> Callable[[str], str]:
    """The pointer entry named by a session's newest fed item, for the caller ``scope`` (serve.sessions)."""
    return lambda key: session_id(scope, "tail", key)


def _error_payload(api: ApiName, status: int, body: Any) -> Any:
    """The upstream's error body as the client's SDK reads it in a stream (a mapping with ``error``)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body
    return error_body(api, f"the upstream answered {status}: {str(body)[:500]}", kind="api_error")


# Keys of a successful reply body (chat, Responses, Messages): a body with one of them is no error, whatever else.
_REPLY_KEYS = ("choices", "output", "content")


async def _error_of_success(upstream: httpx.Response,
                            stream: bool) -> tuple[httpx.Response, dict[str, Any] | None]:
    """The error body of a 2xx answer that holds only an error (some gateways answer errors with 200), else None.

    With the response to read on: a reply to a request that is no stream is read here (the caller reads it again
    from memory); of a stream request's answer, at most the peek is read (some providers answer ``stream: true`` with
    200 and an error event first), or up to the pass-through size (serve.sse) for a body with no event that is JSON
    (labelled so, or opening with ``{``: gateways answer with a JSON error), and an answer that opens otherwise is
    handed on whole, the bytes read here first. A stream request answered with a JSON error is handed on
    as an event stream of that error (its SDK raises it). Up to a9a74c5 an ``application/json`` answer to a stream
    request was read whole here: a large one was held in memory, and nothing reached the client until its end.
    """
    if stream:
        return await _stream_error(upstream)
    data = await upstream.aread()
    await upstream.aclose()
    if b'"error"' not in data:  # (a reply is parsed once, by the caller)
        return upstream, None
    return upstream, _only_error(_json_or_text(data))


def _as_error_event(upstream: httpx.Response, error: dict[str, Any]) -> httpx.Response:
    """A stream answered with a JSON error, as an event stream of that error.

    Relayed as the stream's bytes, the SDKs found no event in it and returned an empty stream without raising: it is
    the stream's error event instead (the SDKs raise it).
    """
    headers = [(k, v) for k, v in upstream.headers.multi_items()
               if k.lower() not in ("content-type", "content-encoding", "content-length", "transfer-encoding")]
    return httpx.Response(upstream.status_code, headers=[*headers, ("content-type", "text/event-stream")],
                          content=encode_event(error, "error"), request=upstream.request)


def _only_error(payload: Any) -> dict[str, Any] | None:
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict) and \
            not any(key in payload for key in _REPLY_KEYS):
        return payload
    return None


# Bytes of a 200 stream read for its first event at most: an opening error is small; past this it is a reply.
_PEEK_BYTES = 64 * 1024


async def _stream_error(upstream: httpx.Response) -> tuple[httpx.Response, dict[str, Any] | None]:
    """The stream to relay with what was read, and its opening error when it opens with one.

    A stream opening with an error is closed, and what was read of it is what is relayed when the error is passed on
    (not an overflow, or one recovery gave up on): relaying the closed upstream cut the client's response after its
    headers, and the error (Anthropic's ``overloaded_error``, a rate limit) never reached it.
    """
    chunks: AsyncIterator[bytes] = upstream.aiter_bytes()
    splitter = SseSplitter()
    read: list[bytes] = []
    held = 0
    first: SseEvent | None = None
    labelled_json = upstream.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json"
    json_body: bool | None = None  # (decided once, when the peek is full)
    async for chunk in chunks:
        read.append(chunk)
        held += len(chunk)
        first = next((event for event in splitter.feed(chunk) if event.data), None)
        if first is not None or held > _MAX_EVENT_BYTES:
            break
        if held > _PEEK_BYTES:
            # A JSON error past the peek (a gateway's long detail, the request echoed) is read up to the
            # pass-through size too: relayed raw, the SDKs found no event in it and raised nothing.
            if json_body is None:
                json_body = labelled_json or _opens_json(read)
            if not json_body:
                break
    else:
        first = next((event for event in splitter.rest() if event.data), None)
        whole = b"".join(read)
        if first is None and b'"error"' in whole:
            # No event in the whole body: a JSON error, whatever the upstream labelled it (text/event-stream,
            # text/plain, application/problem+json), is passed on as the stream's error event.
            error = _only_error(_json_or_text(whole))
            if error is not None:
                await upstream.aclose()
                return _as_error_event(upstream, error), error
    error = _only_error(first.json()) if first is not None and b'"error"' in first.raw else None
    if error is not None:
        await upstream.aclose()
        chunks = _no_more()
    # Decoded bytes from here on: the content-encoding the upstream named is undone already.
    headers = [(k, v) for k, v in upstream.headers.multi_items()
               if k.lower() not in ("content-encoding", "content-length")]
    return httpx.Response(upstream.status_code, headers=headers, stream=_ReadAhead(read, chunks, upstream),
                          request=upstream.request), error


def _opens_json(read: list[bytes]) -> bool:
    """Whether the bytes read open as a JSON object (their first byte past white space is ``{``)."""
    for chunk in read:
        opening = chunk.lstrip()
        if opening:
            return opening.startswith(b"{")
    return False


async def _no_more() -> AsyncIterator[bytes]:
    """The rest of a stream closed after what was read."""
    return
    yield  # (an async generator)


class _ReadAhead(httpx.AsyncByteStream):
    """A stream's bytes: those read ahead, then the rest; closing it closes the upstream's response."""

    def __init__(self, read: list[bytes], rest: AsyncIterator[bytes], upstream: httpx.Response) -> None:
        self._read, self._rest, self._upstream = read, rest, upstream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._read:
            yield chunk
        async for chunk in self._rest:
            yield chunk

    async def aclose(self) -> None:
        await self._upstream.aclose()


def _json_or_text(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # (RecursionError: a body nested past the JSON reader is no JSON to us)
        return data.decode("utf-8", "replace")


def create_app(config: ServeConfig | None = None, **overrides: Any) -> Starlette:
    """The ASGI application for ``config`` (or a default config with ``overrides``)."""
    if config is None:
        config = ServeConfig(**overrides)
    return ServeApp(config).app
