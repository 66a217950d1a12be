"""The proxy's tail pointer costs fewer session-store calls: a new pointer is saved without a load first, and a new
conversation's first request does not look up a pointer its first item cannot name.

Each turn of a conversation named by its opening points an entry named by its newest fed item at its session (a
client that slides its window is found by it, serve.sessions). That entry is almost always new: it was loaded first
only to learn its version (0). A request whose opening was never served looks up the pointers of its newest items;
the first item cannot be a slid session's newest (a slid window keeps at least ``MIN_SLIDE_OVERLAP`` of them).

Real HTTP on 127.0.0.1; the session store's calls are counted.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import openai

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.serve.sessions import Backend
from contextfold.testing import ScriptedLLMServer

MODEL = "gpt-4o-mini"
KEPT = 4  # (the messages a sliding client keeps besides its system prompt, plus its new one)


@pytest.fixture(name="served")
def served_fixture() -> Iterator[tuple[ProxyServer, Backend, ScriptedLLMServer, Counter[str]]]:
    with ScriptedLLMServer(context_window=8_000, validator="formats") as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, sessions="memory", store="memory",
                             archive="memory", windows={MODEL: 6_000}, log_level="warning")
        backend = Backend(config)
        calls: Counter[str] = Counter()
        sessions = backend.sessions
        for name in ("load_state", "save", "delete"):
            method = getattr(sessions, name)

            def counted(*args: Any, _method: Any = method, _name: str = name, **kwargs: Any) -> Any:
                calls[_name] += 1
                return _method(*args, **kwargs)

            setattr(sessions, name, counted)
        with ProxyServer(config, backend=backend) as server:
            yield server, backend, upstream, calls
        backend.close()


def _ask(llm: openai.OpenAI, upstream: ScriptedLLMServer, messages: list[dict[str, Any]], reply: str) -> str:
    upstream.push(reply)
    answer = llm.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    return str(answer.choices[0].message.content)


@pytest.mark.parametrize("slides", [False, True], ids=["growing", "sliding"])
def test_a_turn_saves_its_new_pointer_without_loading_it_first(
        served: tuple[ProxyServer, Backend, ScriptedLLMServer, Counter[str]], slides: bool) -> None:
    proxy, _, upstream, calls = served
    nonce = uuid.uuid4().hex[:8]
    llm = openai.OpenAI(base_url=proxy.url + "/v1", api_key=f"sk-calls-{nonce}", max_retries=0)
    system = {"role": "system", "content": f"You are agent {nonce}."}
    history: list[dict[str, Any]] = []
    per_turn = []
    for turn in range(8):
        history.append({"role": "user", "content": f"step {turn} of {nonce}: run the tests"})
        calls.clear()
        reply = _ask(llm, upstream, [system, *(history[-(KEPT + 1):] if slides else history)], f"ok {turn}")
        per_turn.append(dict(calls))
        history.append({"role": "assistant", "content": reply})
    # The first request: the opening is looked up and one pointer (its user message; not its system prompt), the
    # session saved (and again with the reply), its pointer saved as new (6775dcc: 4 loads: two pointers looked up,
    # the new one loaded before its save).
    assert per_turn[0] == {"load_state": 2, "save": 3}
    # A later turn of a growing conversation: the opening's session loaded (its state then used), saved twice; the
    # new pointer saved; the previous one read (is it still this session's?) and deleted (6775dcc: 3 loads).
    if not slides:
        assert all(c == {"load_state": 2, "save": 3, "delete": 1} for c in per_turn[1:]), per_turn
    else:
        # Once the client dropped its first question, the opening changes every turn: the pointers of the request's
        # newest items are looked up, newest first, until the one naming the session (then the session itself).
        assert all(c.get("save") == 3 and c.get("delete", 0) <= 1 for c in per_turn), per_turn
        assert all(c["load_state"] <= 6 for c in per_turn), per_turn  # (6775dcc: 7 once the window slides)
