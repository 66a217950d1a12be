"""Red team (issue 21 §1): a secret seen only in context by one step of a session that is continued elsewhere.

A fleet worker and the proxy (``contextfold serve``) run each step of a session on a fresh manager that adopts the
stored view. A step in which contextfold wrote nothing of its own (no digest, no summary, no transcript) must still
leave the session's memory knowing the secrets of what it added: a later step that compacts has only the stored
view, and a bare repeat of the value there matches no rule. Found failing on 5894f4b: the value reached the
summary and the archived transcript.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.fleet import FleetWorker
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore
from contextfold.stores.session import MemorySessionStore

# Only a rule with its context (``password: …``) recognises it; alone it is letters and digits.
SECRET = "Zq7hQ2rVx9LmT4kPw8"
WINDOW = 4_000


def _filler(n: int) -> str:
    return " ".join(f"checked module_{n}_{i} and its tests" for i in range(60))


def _log_output() -> str:
    """A long tool output with the credential in its middle: cut at write time, so only the store holds it."""
    lines = [f"svc/pod-{i}: ready=true restarts={i % 3} image=registry.local/svc:{i}" for i in range(400)]
    lines.insert(200, f"export DB_PASSWORD={SECRET}")
    return "\n".join(lines)


def _archived(store: MemoryArchiveStore) -> bytes:
    return b"".join(bytes(data) for data in store._files.values())


def test_a_fleet_step_that_wrote_nothing_still_teaches_the_session_its_secrets() -> None:
    archive_store = MemoryArchiveStore()
    worker = FleetWorker(MemorySessionStore(), blobs=MemoryBlobStore(), archive=Archive(archive_store),
                         max_context_tokens=WINDOW)
    call = ToolCall("call_1", "bash", '{"cmd": "kubectl logs deploy/svc"}')
    worker.turn("s1", 1, [Message("user", "Set up the database user.")],
                [Message("assistant", "Reading the logs.", tool_calls=(call,))])
    worker.turn("s1", 2, [Message("tool", _log_output(), tool_call_id="call_1", name="bash")],
                [Message("assistant", "The service is up.")])
    assert archive_store._files == {}  # the first step wrote nothing: the value was only ever in context
    for number in range(3, 9):
        worker.turn("s1", number, [Message("user", f"Log in with {SECRET} and go on. {_filler(number)}")],
                    [Message("assistant", f"Step {number} done.")])
    worker.compact("s1")
    worker.finish("s1")
    data = _archived(archive_store)
    assert b"summary" in data or b"pre-compact" in b" ".join(n.encode() for _, n in archive_store._files)
    assert SECRET.encode() not in data


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_proxy_request_that_wrote_nothing_still_teaches_the_session_its_secrets(api: str, tmp_path: Path) -> None:
    pytest.importorskip("starlette", reason="contextfold[serve] is not installed")
    import httpx

    from contextfold.serve import ProxyServer, ServeConfig
    from contextfold.testing import ScriptedLLMServer

    with ScriptedLLMServer(default="ok") as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url,
                             sessions="memory", store="memory", archive=str(tmp_path / "archive"),
                             windows={"gpt-4o-mini": WINDOW}, log_level="warning")
        with ProxyServer(config) as proxy, httpx.Client(base_url=proxy.url + "/v1", timeout=30) as client:
            history: list[dict[str, Any]] = [
                {"role": "user", "content": "Set up the database user."},
                {"role": "assistant", "content": "Reading the logs.", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "bash", "arguments": '{"cmd": "kubectl logs deploy/svc"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": _log_output()},
                {"role": "assistant", "content": "The service is up."},
            ]
            if api == "responses":
                history[1:4] = [{"role": "assistant", "content": "Reading the logs."},
                                {"type": "function_call", "call_id": "call_1", "name": "bash",
                                 "arguments": '{"cmd": "kubectl logs deploy/svc"}'},
                                {"type": "function_call_output", "call_id": "call_1", "output": _log_output()},
                                {"role": "assistant", "content": "The service is up."}]
            for number in range(2, 9):
                history += [{"role": "user", "content": f"Log in with {SECRET} and go on. {_filler(number)}"}]
                body = {"model": "gpt-4o-mini", ("messages" if api == "chat" else "input"): history}
                reply = client.post("/chat/completions" if api == "chat" else "/responses", json=body,
                                    headers={"authorization": "Bearer sk-test", "x-contextfold-session": "one"})
                assert reply.status_code == 200, reply.text
                history += [{"role": "assistant", "content": f"Step {number} done."}]
    files = [p for p in (tmp_path / "archive").rglob("*") if p.is_file()]
    assert any("pre-compact" in p.name for p in files)  # the session was compacted, its history archived
    leaked = [p.name for p in files if SECRET.encode() in p.read_bytes()]
    assert leaked == []


def test_a_manager_that_adopts_a_view_knows_the_secrets_of_the_step_that_stored_it(tmp_path: Path) -> None:
    from contextfold.manager import ContextManager

    def manager() -> ContextManager:
        return ContextManager("gpt-4o", max_context_tokens=WINDOW, store=f"local://{tmp_path / 'store'}",
                              archive=str(tmp_path / "archive"), session_id="s1")

    first = manager()
    first.add([Message("user", "Read the logs."),
               Message("assistant", "Reading.", tool_calls=(ToolCall("call_1", "bash", '{"cmd": "logs"}'),)),
               Message("tool", _log_output(), tool_call_id="call_1", name="bash")])
    first.prepare()
    stored = first.stored_messages()  # the process that held it dies here (no close(), no finish())
    second = manager()
    second.adopt(stored)
    second.add([Message("user", f"Log in with {SECRET} and go on. {_filler(1)}")])
    second.compact()
    second.close()
    files = [p for p in (tmp_path / "archive").rglob("*") if p.is_file()]
    assert any("pre-compact" in p.name for p in files)
    assert [p.name for p in files if SECRET.encode() in p.read_bytes()] == []
    first.close()
