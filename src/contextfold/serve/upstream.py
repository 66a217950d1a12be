"""The upstream providers: where each API is forwarded, which headers go along, and errors in each API's shape."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import MissingExtra

try:
    import httpx
except ImportError as exc:  # the proxy's stack is an extra
    raise MissingExtra("contextfold serve", "serve", module=exc.name) from exc

from .apis import PROVIDERS, ApiName
from .config import ServeConfig

__all__ = ["Upstream", "UpstreamError", "error_body", "response_headers"]

# Request headers never forwarded: hop-by-hop ones, the ones httpx sets for the new body, and the proxy's own.
_DROP_REQUEST = frozenset({"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te",
                           "upgrade", "proxy-authorization", "proxy-connection", "accept-encoding", "trailer"})
_OWN_PREFIX = "x-contextfold-"
# Response headers passed back: what the SDKs read (request ids, rate limits, retry advice, the content type).
_KEEP_RESPONSE_PREFIXES = ("x-ratelimit-", "openai-", "anthropic-", "x-request-id", "request-id", "retry-after",
                           "x-should-retry", "content-type")
# Connections kept to the upstream: enough for a busy instance; an agent request holds one for its whole reply.
MAX_CONNECTIONS = 512
# Upstream paths of each API, after the provider's base URL (OpenAI's includes /v1, Anthropic's does not).
_PATHS: dict[ApiName, str] = {"chat": "/chat/completions", "responses": "/responses", "messages": "/v1/messages"}


class UpstreamError(Exception):
    """An upstream answer with an error status; ``body`` is its JSON (read by ``parse_overflow``)."""

    def __init__(self, status_code: int, body: Any, provider: str) -> None:
        self.status_code = status_code
        self.body = body
        self.provider = provider
        super().__init__(f"upstream {provider} answered {status_code}")


class Upstream:
    """One pooled async HTTP client for every upstream call of the instance."""

    def __init__(self, config: ServeConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.upstream_timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS),
            transport=transport, follow_redirects=False,
        )

    def url(self, api: ApiName) -> str:
        """The upstream URL of ``api``."""
        base = self.config.openai_base_url if PROVIDERS[api] == "openai" else self.config.anthropic_base_url
        return base.rstrip("/") + _PATHS[api]

    async def send(self, api: ApiName, body: Mapping[str, Any], headers: Mapping[str, str]) -> httpx.Response:
        """Send ``body`` with the caller's headers (its API key among them); the response is read by the caller."""
        forwarded = {k: v for k, v in headers.items() if k not in _DROP_REQUEST and not k.startswith(_OWN_PREFIX)}
        forwarded["content-type"] = "application/json"
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        request = self.client.build_request("POST", self.url(api), content=content, headers=forwarded)
        return await self.client.send(request, stream=True)

    async def forward(self, method: str, path: str, query: str, content: bytes,
                      headers: Mapping[str, str]) -> httpx.Response:
        """Any other request of an SDK (``GET /v1/models``, ``/v1/messages/count_tokens``, …), passed as it is.

        Paths under ``/v1/messages`` go to the Anthropic upstream, everything else to the OpenAI one.
        """
        if path.startswith("/v1/messages") or path.startswith("/messages"):
            base = self.config.anthropic_base_url.rstrip("/")
            path = path if path.startswith("/v1/") else "/v1" + path
        else:
            base = self.config.openai_base_url.rstrip("/")
            path = path[3:] if path.startswith("/v1/") else path  # the OpenAI base URL ends in /v1
        forwarded = {k: v for k, v in headers.items() if k not in _DROP_REQUEST and not k.startswith(_OWN_PREFIX)}
        url = base + path + (f"?{query}" if query else "")
        request = self.client.build_request(method, url, content=content or None, headers=forwarded)
        return await self.client.send(request, stream=True)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()


def response_headers(response: httpx.Response) -> dict[str, str]:
    """The upstream's headers the caller gets back."""
    return {k: v for k, v in response.headers.items() if k.lower().startswith(_KEEP_RESPONSE_PREFIXES)}


def error_body(api: ApiName, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    """An error of the proxy's own, in the shape the caller's SDK reads (OpenAI's or Anthropic's)."""
    if PROVIDERS[api] == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
