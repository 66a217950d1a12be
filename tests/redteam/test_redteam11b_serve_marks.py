"""The proxy's session marks as someone else left them: an error naming the mark, not an internal error.

``contextfold serve`` keeps, with every session, marks it reads back on the next request: the item keys fed
(``keys``, JSON), the client's token count (``client_tokens``), the provider's usage (``usage``, JSON). The session
store is shared (a Redis of the whole fleet, an SQLite file). Found tampering each mark of a served session in its
``sessions.sqlite3`` and sending the next request: a mark nested past the JSON reader's depth, no JSON, JSON of the
wrong shape or a count that is no number made every later request of that session a 500
``contextfold serve: internal error (RecursionError | JSONDecodeError | TypeError | ValueError)``. Now the request
ends in the store's error (503) naming the session's mark, as any other unreadable record of the store.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import ScriptedLLMServer

MODEL = "gpt-4o-mini"
NONCE = "rt11b-marks-2b7e"

TAMPERINGS = {
    "keys nested past the reader": ("keys", "[" * 100_000),
    "keys that are no JSON": ("keys", "abc"),
    "keys that are no list of keys": ("keys", "[1, 2]"),
    "client token count that is text": ("client_tokens", "abc"),
    "client token count of 5,000 digits": ("client_tokens", "9" * 5000),
    "usage nested past the reader": ("usage", "[" * 100_000),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ScriptedLLMServer, ProxyServer]]:
    with ScriptedLLMServer() as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, state_dir=str(tmp_path_factory.mktemp("s")),
                             store="memory", archive="memory", windows={MODEL: 8_000}, log_level="warning")
        with ProxyServer(config) as proxy:
            yield upstream, proxy


@pytest.mark.parametrize("tampering", list(TAMPERINGS))
def test_a_tampered_mark_is_named_not_an_internal_error(
    served: tuple[ScriptedLLMServer, ProxyServer], tampering: str
) -> None:
    upstream, proxy = served
    session = f"{NONCE}-{uuid.uuid4().hex[:8]}"

    def chat(messages: list[dict[str, str]]) -> httpx.Response:
        return httpx.post(proxy.url + "/v1/chat/completions", timeout=20,
                          headers={"authorization": "Bearer k", "x-contextfold-session": session},
                          json={"model": MODEL, "messages": messages})

    upstream.push("noted")
    first = [{"role": "user", "content": f"{NONCE} hello"}]
    assert chat(first).status_code == 200
    name, value = TAMPERINGS[tampering]
    path = Path(proxy.serve_app.backend.sessions.path)  # type: ignore[attr-defined]
    with sqlite3.connect(path) as db:  # every session this proxy served: the one just served is among them
        db.execute("DELETE FROM session_marks WHERE name = ?", (name,))
        db.executemany("INSERT INTO session_marks (session_id, name, value) VALUES (?, ?, ?)",
                       [(row[0], name, value) for row in db.execute("SELECT id FROM sessions").fetchall()])
    upstream.push("again")
    response = chat([*first, {"role": "assistant", "content": "noted"}, {"role": "user", "content": "more"}])
    assert response.status_code == 503, response.text
    assert f"stored mark {name!r}" in response.json()["error"]["message"]
