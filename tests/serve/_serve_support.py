"""One scripted upstream and one proxy per test module (both real HTTP servers on 127.0.0.1), reused by its tests.

Tests tell their sessions apart by their opening message (the proxy's fingerprint) or the session header, and read
what reached the upstream from ``upstream.requests`` after the count they noted before. Not a ``conftest.py``: a
second module named ``conftest`` shadows the root one that other tests import from; modules import the fixtures
they use (``upstream_fixture`` registers ``upstream``, and so on).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import ScriptedLLMServer

# The proxy works in this window; the upstream refuses anything over UPSTREAM_WINDOW (a bit larger: our count and
# the scripted server's differ a little, and the tests check the proxy keeps every request within its own window).
WINDOW = 6_000
UPSTREAM_WINDOW = 8_000
MODEL = "gpt-4o-mini"


def proxy_config(upstream: ScriptedLLMServer, **overrides: Any) -> ServeConfig:
    options: dict[str, Any] = {"port": 0, "openai_base_url": upstream.base_url, "anthropic_base_url": upstream.url,
                               "sessions": "memory", "store": "memory", "archive": "memory",
                               "windows": {MODEL: WINDOW, "claude-haiku-4-5": WINDOW}, "log_level": "warning"}
    options.update(overrides)
    return ServeConfig(**options)


@pytest.fixture(scope="module", name="upstream")
def upstream_fixture() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=UPSTREAM_WINDOW, validator="formats") as server:
        yield server


@pytest.fixture(scope="module", name="proxy")
def proxy_fixture(upstream: ScriptedLLMServer) -> Iterator[ProxyServer]:
    with ProxyServer(proxy_config(upstream)) as server:
        yield server


@pytest.fixture(name="opening")
def opening_fixture() -> str:
    """A task statement no other test uses: a session of its own."""
    return f"Task {uuid.uuid4().hex[:8]}: find why the parser fails on empty input."
