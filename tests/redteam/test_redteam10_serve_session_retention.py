"""The proxy's stored sessions are deleted after the archive's retention age, not kept forever (red team, tenth
session).

Every conversation ``contextfold serve`` serves is a stored session: its view as the model saw it (whole user
messages, tool outputs up to their cut, secrets in clear). The tool output store drops what no session used for
30 days (and the session's secret memory with it), the archive drops a session's transcripts after 30 days; the
session store (``sessions.sqlite3``, or Redis without a TTL) kept every session ever served, growing for as long as
the proxy ran and keeping each conversation's secrets after everything else of it was gone. A session not continued
for ``session_max_age_s`` (30 days, the archive's age) is now deleted: the local store's when the proxy starts and
then at most hourly, a Redis session by its TTL.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from pathlib import Path

import httpx
import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

from contextfold.messages import Message
from contextfold.serve import ProxyServer, ServeConfig
from contextfold.stores.session_local import LocalSessionStore
from contextfold.testing import ScriptedLLMServer

MODEL = "gpt-4o-mini"
DAY_S = 24 * 3600.0
SECRET = "Qv8TnZ3pLw7RkX2m"


def test_a_session_not_continued_for_the_archives_age_is_deleted(tmp_path: Path) -> None:
    nonce = uuid.uuid4().hex[:8]
    with ScriptedLLMServer() as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, state_dir=str(tmp_path), store="memory",
                             archive="memory", windows={MODEL: 8_000}, log_level="warning")
        with ProxyServer(config) as proxy:
            upstream.push("noted", "still here")

            def chat(name: str, text: str) -> None:
                response = httpx.post(proxy.url + "/v1/chat/completions", timeout=20,
                                      headers={"authorization": f"Bearer k-{nonce}",
                                               "x-contextfold-session": f"{name}-{nonce}"},
                                      json={"model": MODEL, "messages": [{"role": "user", "content": text}]})
                assert response.status_code == 200, response.text

            chat("old", f"the staging password: {SECRET}")
            chat("recent", "hello")
            backend = proxy.serve_app.backend
            sessions = backend.sessions
            assert isinstance(sessions, LocalSessionStore)
            # 31 days on, the first session was not continued; the second one was, yesterday.
            with sqlite3.connect(sessions.path) as db:
                db.execute("UPDATE session_saved SET saved_at = saved_at - ? WHERE session_id = (SELECT session_id "
                           "FROM session_saved ORDER BY saved_at LIMIT 1)", (30 * DAY_S,))
            gone = backend.prune_sessions(now=time.time() + DAY_S)
            assert len(gone) == 1
            remaining = [state for state in (sessions.load_state(s) for s in _ids(sessions)) if state.messages]
            assert len(remaining) == 1 and "hello" in remaining[0].messages[0].text
            assert not any(SECRET in m.text for state in remaining for m in state.messages)


def _ids(store: LocalSessionStore) -> list[str]:
    with sqlite3.connect(store.path) as db:
        return [str(row[0]) for row in db.execute("SELECT id FROM sessions")]


def test_sessions_saved_before_saves_were_timed_go_a_full_age_later(tmp_path: Path) -> None:
    with LocalSessionStore(tmp_path) as store:
        store.save("legacy", [Message("user", "from an earlier version")], 0)
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as db:
        db.execute("DROP TABLE session_saved")  # the file as an earlier version left it
    with LocalSessionStore(tmp_path) as store:
        now = time.time()
        assert store.prune(30 * DAY_S, now=now) == []
        assert store.load("legacy")[1] == 1
        assert store.prune(30 * DAY_S, now=now + 31 * DAY_S) == ["legacy"]
        assert store.load("legacy") == ([], 0)


def test_the_age_is_a_setting() -> None:
    assert ServeConfig().session_max_age_s == 30 * DAY_S
    assert ServeConfig(session_max_age_s=None).session_max_age_s is None
    with pytest.raises(ValueError, match="session_max_age_s"):
        ServeConfig(session_max_age_s=0)


@pytest.mark.parametrize(("days", "seconds"), [("7", 7 * DAY_S), ("0", None)])
def test_the_command_line_sets_the_age(days: str, seconds: float | None) -> None:
    from contextfold.cli import build_parser
    from contextfold.cli.serve import config_from_args

    args = build_parser().parse_args(["serve", "--session-max-age-days", days])
    config = config_from_args(args, environ={})
    assert isinstance(config, ServeConfig) and config.session_max_age_s == seconds


def test_a_redis_session_expires_at_the_age(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    from contextfold.serve.sessions import open_session_store

    store = open_session_store("redis://127.0.0.1:1/0", tmp_path, 30 * DAY_S)  # (no connection until used)
    assert getattr(store, "ttl_seconds", None) == 30 * 24 * 3600
    assert getattr(open_session_store("redis://127.0.0.1:1/0", tmp_path), "ttl_seconds", 0) is None
