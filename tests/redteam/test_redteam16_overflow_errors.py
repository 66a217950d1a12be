"""An overflow error that proves nothing about the model's limit sets no limit for anyone (red team 16).

Found by the sixteenth red team over real HTTP on loopback. On 309338f: (1) an error that names no limit (OpenAI's
Responses wording, gateways' "context_length_exceeded") taught a limit 15% below the refused request, stored for
the model in the shared store: one caller's 10-token request refused so gave every caller of the proxy a 9-token
limit, for good ("contextfold cannot fit this conversation in the window" on every later request of every caller).
Such an error now teaches the refused request's session only. (2) An error whose own figures put the request under
its limit ("maximum context length is 128000 tokens. However, your messages resulted in 40 tokens") was taken for
an overflow: three retries, each compacting, and the session kept a 24-token limit of its own; recovery now gives
up at once, learning nothing and leaving the view as it was.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import httpx

from contextfold import ContextManager
from contextfold.errors import RecoveryFailed
from contextfold.messages import Message
from contextfold.recovery import OverflowInfo, OverflowRecovery
from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import ErrorReply, RecordedRequest, ScriptedLLMServer
from contextfold.testing.server import ScriptedReply

NONCE = "rt16-overflow-Vq3m"
MODEL = "gpt-4o-mini"
WINDOW = 16_000
FIGURELESS = "Your input exceeds the context window of this model. Please adjust your input and try again."
LYING = ("This model's maximum context length is 128000 tokens. However, your messages resulted in 40 tokens. "
         "Please reduce the length of the messages.")


def _serve(answer_a: Callable[[RecordedRequest], ScriptedReply],
           run: Callable[[httpx.Client, ScriptedLLMServer], None]) -> None:
    def handler(request: RecordedRequest) -> ScriptedReply:
        if "caller-a" in request.headers.get("authorization", ""):
            return answer_a(request)
        return f"ok {NONCE}"

    with ScriptedLLMServer(handler=handler) as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url,
                             sessions="memory", store="memory", archive="memory", windows={MODEL: WINDOW},
                             log_level="critical")
        with ProxyServer(config) as proxy, httpx.Client(base_url=proxy.url, timeout=30) as client:
            run(client, upstream)


def _chat(client: httpx.Client, key: str, messages: list[dict[str, str]]) -> httpx.Response:
    return client.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                       json={"model": MODEL, "messages": messages})


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_one_callers_figureless_overflow_does_not_shrink_another_callers_window(api: str) -> None:
    def run(client: httpx.Client, upstream: ScriptedLLMServer) -> None:
        if api == "chat":
            refused = _chat(client, "sk-caller-a", [{"role": "user", "content": f"hello {NONCE}"}])
        else:
            refused = client.post("/v1/responses", headers={"authorization": "Bearer sk-caller-a"},
                                  json={"model": MODEL, "input": f"hello {NONCE}"})
        assert refused.status_code == 400
        ordinary = _chat(client, "sk-caller-b", [{"role": "user", "content": f"please review {NONCE} " * 200}])
        assert ordinary.status_code == 200, ordinary.text
        assert upstream.requests[-1].body["messages"][0]["content"].count(NONCE) == 200  # sent whole, uncompacted

    _serve(lambda _request: ErrorReply("context_overflow", message=FIGURELESS), run)


def test_a_session_still_learns_from_a_figureless_overflow() -> None:
    """The session refused keeps what it learned (the limit goes below what it sent); another session does not."""
    store = "memory"
    cm = ContextManager(MODEL, max_context_tokens=WINDOW, store=store, session_id="s-a")
    # (The bulk before the latest request: a limit without figures is never inferred under what must stay.)
    cm.add([Message.user(f"{NONCE} " + "word " * 3_000), Message.assistant("read"), Message.user("go on")])
    cm.prepare("openai_chat")
    OverflowRecovery(cm, 3, 0).shrink(OverflowInfo(FIGURELESS, "openai"), RuntimeError("refused"))
    assert cm.learned_limit is not None and cm.learned_limit < 3_100
    other = ContextManager(MODEL, max_context_tokens=WINDOW, store=cm.cache.store if cm.cache else store,
                           session_id="s-b")
    assert other.learned_limit is None


def test_an_error_whose_figures_say_the_request_fits_changes_nothing() -> None:
    def run(client: httpx.Client, upstream: ScriptedLLMServer) -> None:
        history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"first {NONCE}"},
                   {"role": "assistant", "content": "noted"}, {"role": "user", "content": f"second {NONCE}"}]
        before = len(upstream.requests)
        refused = _chat(client, "sk-caller-a", history)
        assert refused.status_code == 400
        assert len(upstream.requests) - before == 1  # no retries: a smaller view would be refused the same way
        answer_a["reply"] = f"ok {NONCE}"
        again = _chat(client, "sk-caller-a", [*history, {"role": "assistant", "content": "?"},
                                              {"role": "user", "content": f"third {NONCE}"}])
        assert again.status_code == 200, again.text
        sent = upstream.requests[-1].body["messages"]
        assert [m["content"] for m in sent[:4]] == [m["content"] for m in history]  # nothing compacted or dropped

    answer_a: dict[str, ScriptedReply] = {"reply": ErrorReply("context_overflow", message=LYING)}
    _serve(lambda _request: answer_a["reply"], run)


def test_recovery_gives_up_at_once_on_such_an_error() -> None:
    cm = ContextManager(MODEL, max_context_tokens=WINDOW, store="memory", session_id="s-lying")
    cm.add([Message.user(f"{NONCE} hello")])
    cm.prepare("openai_chat")
    with pytest.raises(RecoveryFailed, match="within its limit"):
        OverflowRecovery(cm, 3, 0).shrink(OverflowInfo(LYING, "openai", prompt_tokens=40, limit=128_000),
                                          RuntimeError("refused"))
    assert cm.learned_limit is None


def test_a_limit_stated_without_the_requests_count_is_read() -> None:
    """"This model's maximum context length is N tokens. Please reduce…" names the limit (it was read as none)."""
    from contextfold.recovery import parse_overflow

    info = parse_overflow({"error": {"message": "This model's maximum context length is 8192 tokens. Please reduce "
                                                "the length of the messages.", "code": "context_length_exceeded"}})
    assert info is not None and (info.limit, info.prompt_tokens) == (8_192, None)
