"""Two proxy instances over one redis-server and one S3 (moto_server): any instance serves any request of a session.

Requests of one conversation alternate between the instances (a round-robin balancer, no sticky sessions); one
request fails after its instance saved the session (as if the instance died before answering) and the client's
retry goes to the other instance. The archive and the stored view together give back every message once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from _serve_support import MODEL, WINDOW, opening_fixture, proxy_config, upstream_fixture  # noqa: F401 (fixtures)
from conftest import require_binary

from contextfold.formats import openai_chat
from contextfold.serve import ProxyServer
from contextfold.serve.identity import caller_scope, opening_fingerprint, session_id
from contextfold.serve.sessions import Backend, restore
from contextfold.testing import ErrorReply, Reply, ScriptedLLMServer, ScriptedToolCall
from contextfold.testing.services import MotoServer, RedisServer, s3_environment

pytestmark = [pytest.mark.redis, pytest.mark.s3]
SALT = "fleet-test-salt"
KEY = "sk-fleet-caller"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    require_binary("redis-server")
    require_binary("moto_server")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in s3_environment().items():
            mp.setenv(name, value)
        with RedisServer(tmp_path_factory.mktemp("redis")) as redis, MotoServer("archive") as moto:
            yield {"sessions": redis.url, "store": redis.url,
                   "archive": f"s3://archive/serve?endpoint_url={moto.url}&path_style=true"}


@pytest.fixture(scope="module")
def instances(upstream: ScriptedLLMServer, shared: dict[str, str]) -> Iterator[list[ProxyServer]]:
    config = proxy_config(upstream, key_salt=SALT, **shared)
    with ProxyServer(config) as one, ProxyServer(config) as two:
        yield [one, two]


def listing(turn: int) -> str:
    return "\n".join(f"t{turn} {i:04d} tests/test_{i % 29}.py::case_{i} PASSED in {i % 7}.{i % 10}s"
                     for i in range(300))


def test_instances_take_turns_on_one_session_and_lose_nothing(upstream: ScriptedLLMServer,
                                                              instances: list[ProxyServer], opening: str) -> None:
    clients = [openai.OpenAI(base_url=p.url + "/v1", api_key=KEY, max_retries=0) for p in instances]
    history: list[dict[str, Any]] = [{"role": "system", "content": "Run the tests."},
                                     {"role": "user", "content": opening}]
    before = len(upstream.requests)
    for turn in range(10):
        call = Reply.calling(ScriptedToolCall("pytest", {"k": f"t{turn}"}, id=f"call_f{turn}"))
        llm = clients[turn % 2]
        if turn == 5:
            # The upstream fails after the session was saved; the client retries on the other instance.
            upstream.push(ErrorReply.server_error(), call)
            with pytest.raises(openai.InternalServerError):
                llm.chat.completions.create(model=MODEL, messages=history)
            llm = clients[(turn + 1) % 2]
        else:
            upstream.push(call)
        message = llm.chat.completions.create(model=MODEL, messages=history).choices[0].message
        history += [message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": f"call_f{turn}", "content": listing(turn)}]
    upstream.push("All green.")
    clients[0].chat.completions.create(model=MODEL, messages=history)

    sent = upstream.requests[before:]
    assert len(sent) == 12 and [r.status for r in sent].count(500) == 1
    assert all(r.invalid is None and r.input_tokens <= WINDOW for r in sent)
    # Compactions happened (the history is far over the window), on both instances.
    assert sum(p.serve_app.metrics.compactions.labels("chat")._value.get() for p in instances) > 0
    assert all(p.serve_app.metrics.requests.labels("chat", "200")._value.get() > 0 for p in instances)

    sid = session_id(caller_scope(KEY, SALT), "opening", opening_fingerprint(history))
    restored = restore(Backend(instances[0].config), sid)
    expected = openai_chat.decode(history)
    assert [(m.role, m.text, m.tool_calls) for m in restored] == [(m.role, m.text, m.tool_calls) for m in expected]
