"""An application that runs the proxy without ``configure_logging`` (``ProxyServer``, or ``ServeApp.app`` mounted in
its own ASGI server) keeps its own log handlers, and the proxy's lines still reach them redacted, off the event loop.

base19: with no handler of its own, ``contextfold.serve`` passed its records straight up to the application's
handlers, on the event loop and unredacted: the ``fields`` of a "served" line (the client's model name) reached a
handler that prints them with an operator's secret in clear, and any slow handler held every request meanwhile.

a9a74c5: the writer was started by the proxy's lifespan only, and Starlette runs no lifespan of an app mounted in
another: mounted, every line went on the loop, unredacted, as before. The first request starts it now.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from _serve_support import HostServer, ProxyLines, application_logging, proxy_config
from starlette.applications import Starlette
from starlette.routing import Mount

from contextfold.serve import ProxyServer
from contextfold.serve.app import ServeApp
from contextfold.testing import ScriptedLLMServer

SECRET = "TCK-482913"
MODEL = f"acme-{SECRET}-large"


@pytest.fixture(name="application_logging")
def application_logging_fixture() -> Iterator[ProxyLines]:
    collected = ProxyLines()
    with application_logging(collected):
        yield collected


def test_lines_reach_the_applications_handlers_redacted_and_off_the_loop(application_logging: ProxyLines) -> None:
    with ScriptedLLMServer(default="ok") as upstream, \
            ProxyServer(proxy_config(upstream, default_window=6_000, redact_patterns={"ticket": r"TCK-[0-9]{6}"})
                        ) as proxy:
        served = httpx.post(proxy.url + "/v1/chat/completions", timeout=30, json={
            "model": MODEL, "messages": [{"role": "user", "content": "hello"}]})
    assert served.status_code == 200, served.text
    ours = [seen for seen in application_logging.seen if seen[0] in ("serving", "served")]
    assert [message for message, *_ in ours] == ["serving", "served"]  # (every line written by the proxy's stop)
    served_fields = ours[1][1]
    assert served_fields["model"] == "acme-[REDACTED:ticket]-large"
    assert SECRET not in repr(application_logging.seen)
    assert not any(on_loop for _, _, on_loop, _ in application_logging.seen)
    # The application's logging is left as it was found.
    serve = logging.getLogger("contextfold.serve")
    assert serve.handlers == [] and serve.propagate


def test_an_application_handler_on_the_proxys_logger_is_left_alone(application_logging: ProxyLines) -> None:
    # (its own handler on contextfold.serve: it chose where the lines go, as configure_logging does)
    own = ProxyLines()
    serve = logging.getLogger("contextfold.serve")
    serve.addHandler(own)
    try:
        with ScriptedLLMServer(default="ok") as upstream, ProxyServer(proxy_config(upstream)) as proxy:
            assert serve.handlers == [own]
            assert httpx.post(proxy.url + "/v1/chat/completions", timeout=30, json={
                "model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}).status_code == 200
    finally:
        serve.removeHandler(own)
    assert "served" in [message for message, *_ in own.seen]


def mounted(serve: ServeApp, *, with_lifespan: bool) -> Starlette:
    """A host application with the proxy under /proxy; its stop closes the proxy, or it runs the proxy's lifespan."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if with_lifespan:
            async with serve.lifespan(app):
                yield
            return
        try:
            yield
        finally:
            await serve.aclose()

    return Starlette(routes=[Mount("/proxy", app=serve.app)], lifespan=lifespan)


@pytest.mark.parametrize("with_lifespan", [False, True], ids=["no-lifespan", "host-runs-lifespan"])
def test_a_mounted_proxys_lines_reach_the_handlers_redacted_and_off_the_loop(application_logging: ProxyLines,
                                                                           with_lifespan: bool) -> None:
    with ScriptedLLMServer(default="ok") as upstream, \
            HostServer(proxy_config(upstream, default_window=6_000, redact_patterns={"ticket": r"TCK-[0-9]{6}"}),
                       functools.partial(mounted, with_lifespan=with_lifespan)) as host:
        for _ in range(2):
            served = httpx.post(host.url + "/proxy/v1/chat/completions", timeout=30, json={
                "model": MODEL, "messages": [{"role": "user", "content": "hello"}]})
            assert served.status_code == 200, served.text
    assert SECRET not in repr(application_logging.seen)  # (before the fix, no lifespan: in clear)
    assert not any(on_loop for _, _, on_loop, _ in application_logging.seen)  # (before: on the loop)
    ours = [seen for seen in application_logging.seen if seen[0] in ("serving", "served")]
    assert [message for message, *_ in ours] == ["serving", "served", "served"]  # (one writer, all written at stop)
    assert [fields["model"] for _, fields, *_ in ours[1:]] == ["acme-[REDACTED:ticket]-large"] * 2
    serve = logging.getLogger("contextfold.serve")
    assert serve.handlers == [] and serve.propagate  # (put back by the host's stop)
