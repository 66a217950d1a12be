"""``contextfold serve``: a context-managing HTTP proxy for agents in any language (``contextfold[serve]``).

Contract. The proxy speaks OpenAI Chat Completions (``/v1/chat/completions``), OpenAI Responses (``/v1/responses``)
and Anthropic Messages (``/v1/messages``), streaming (server-sent events passed through as they arrive) and not, and
forwards each request to the upstream of its provider (``openai_base_url`` / ``anthropic_base_url``) with the
caller's own API key, which it never stores or logs (sessions are scoped to a salted hash of it). Any other path
is forwarded as it is (``Upstream.forward``), without a session.

- **Sessions** (``sessions.py``, ``identity.py``): named by the ``x-contextfold-session`` header, else by the
  request's conversation handle (Responses ``previous_response_id`` / ``conversation``), else by a fingerprint of
  the conversation's opening; always within the caller's scope. The client's full history is reconciled with the
  session (``manager/reconcile.py``: only new items are fed, a diverging history rebuilds the view and archives the
  old one), contextfold's view replaces the history on the upstream call, the usage the upstream reports is
  recorded, and a context-length error is recovered in the proxy (``contextfold.recovery``).
- **A reply joins the session when the client sends it back** (the next request's history). Where the client does
  not (a Responses continuation), the proxy keeps the reply and feeds it before the continuation's input.
- **Retrieval tools** (``retrieval.py``, optional): the proxy adds ``tool_output_cache``,
  ``tool_output_cache_grep`` and ``history_search``, answers the model's calls to them, and calls the upstream again;
  the client only sees its own tools, streaming included. A round's context-length error is recovered like the
  first call's; a round the upstream refuses otherwise reaches the client as that error (its status, or its
  stream's last event), never as a reply whose only calls were taken out.
- **Many instances** (``sessions.py``): every request loads the session with its version, feeds, prepares and saves
  with optimistic concurrency before anything goes upstream (a conflict redoes the step), so instances over a shared
  Redis session/blob store and S3 archive serve any session behind a round-robin balancer; message ids are derived
  from the session, the version and the items, so a request retried after an instance died adds nothing twice. A
  Responses continuation holds a lease in the shared blob store while in flight (``leases.py``): a second
  continuation of the same response meanwhile, on any instance, is a 409.
- **Operations** (``ops.py``, ``app.py``): ``/healthz``, ``/readyz``, Prometheus ``/metrics``, JSON log lines with
  secrets redacted, a body size limit, upstream timeouts, graceful shutdown; binds to 127.0.0.1 unless told
  otherwise, and any other address requires a token (``x-contextfold-token``).

Layout: ``config`` (ServeConfig), ``apis`` (the three APIs as bodies in, bodies out), ``identity`` (callers and
session names), ``sessions`` (stores and one request's turn), ``leases`` (a continuation in flight), ``sse`` and
``replies`` (streams read as they pass), ``upstream`` (the httpx client), ``retrieval`` (server-side tools), ``ops``
(metrics, logs), ``app`` (Starlette), ``runner`` (uvicorn: foreground or a thread).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .app import ServeApp, create_app
    from .config import ServeConfig
    from .runner import ProxyServer, run
    from .sessions import Backend

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "Backend": ".sessions",
    "ProxyServer": ".runner",
    "ServeApp": ".app",
    "ServeConfig": ".config",
    "create_app": ".app",
    "run": ".runner",
}
__all__ = ["Backend", "ProxyServer", "ServeApp", "ServeConfig", "create_app", "run"]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
