"""ScriptedLLMServer speaks three real APIs: the official SDKs parse its bodies and raise their own errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import ErrorReply, Reply, ScriptedToolCall
from contextfold.tokens import EstimatingCounter


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(counter=EstimatingCounter()) as s:
        yield s


def oai(server: ScriptedLLMServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)


def ant(server: ScriptedLLMServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)


def chat(server: ScriptedLLMServer, text: str = "hello", **kw: Any) -> Any:
    return oai(server).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": text}],
                                               **kw)


def messages(server: ScriptedLLMServer, text: str = "hello", max_tokens: int = 100) -> Any:
    return ant(server).messages.create(model="claude-haiku-4-5", max_tokens=max_tokens,
                                       messages=[{"role": "user", "content": text}])


# -- successful replies -------------------------------------------------------------------------------------------


def test_chat_completion_is_parsed_by_the_sdk(server: ScriptedLLMServer) -> None:
    server.push("the answer")
    response = chat(server, "question", max_tokens=50, seed=7, temperature=0)
    assert response.choices[0].message.content == "the answer"
    assert response.choices[0].finish_reason == "stop"
    assert response.model == "gpt-4o-mini"
    assert response.usage is not None and response.usage.completion_tokens == EstimatingCounter().count("the answer")
    recorded = server.requests[0]
    assert (recorded.api, recorded.max_tokens, recorded.body["seed"]) == ("chat", 50, 7)
    assert recorded.items == [{"role": "user", "content": "question"}]
    assert recorded.input_tokens == response.usage.prompt_tokens > 0


def test_responses_api_is_parsed_by_the_sdk(server: ScriptedLLMServer) -> None:
    server.push("from responses")
    response = oai(server).responses.create(model="gpt-4o", input="hi", instructions="be brief", max_output_tokens=30)
    assert response.output_text == "from responses"
    assert response.status == "completed"
    assert response.usage is not None and response.usage.output_tokens > 0
    assert server.requests[0].max_tokens == 30
    assert server.requests[0].items == [{"role": "user", "content": "hi"}]


def test_anthropic_message_is_parsed_by_the_sdk(server: ScriptedLLMServer) -> None:
    server.push("from claude")
    response = messages(server)
    assert [b.text for b in response.content if b.type == "text"] == ["from claude"]
    assert response.stop_reason == "end_turn"
    assert response.usage.input_tokens == server.requests[0].input_tokens
    assert server.requests[0].api == "messages"


def test_tool_calls_in_each_api(server: ScriptedLLMServer) -> None:
    call = ScriptedToolCall("read_file", {"path": "src/app.py"})
    server.push(Reply.calling(call), Reply.calling(call), Reply.calling(call, text="reading"))
    c = chat(server)
    assert c.choices[0].finish_reason == "tool_calls"
    assert c.choices[0].message.tool_calls[0].function.name == "read_file"
    assert c.choices[0].message.tool_calls[0].function.arguments == '{"path": "src/app.py"}'
    r = oai(server).responses.create(model="gpt-4o", input="x")
    fc = [item for item in r.output if item.type == "function_call"]
    assert fc[0].name == "read_file" and fc[0].call_id.startswith("call_")
    m = messages(server)
    assert m.stop_reason == "tool_use"
    uses = [b for b in m.content if b.type == "tool_use"]
    assert uses[0].input == {"path": "src/app.py"} and uses[0].id.startswith("toolu_")


def test_replies_longer_than_max_tokens_are_cut_with_the_length_reason(server: ScriptedLLMServer) -> None:
    long = "word " * 400
    server.push(long, long, long)
    c = chat(server, max_tokens=20)
    assert c.choices[0].finish_reason == "length"
    assert EstimatingCounter().count(c.choices[0].message.content) <= 20
    r = oai(server).responses.create(model="gpt-4o", input="x", max_output_tokens=20)
    assert r.status == "incomplete" and r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens"
    assert messages(server, max_tokens=20).stop_reason == "max_tokens"


def test_refusals_in_each_api(server: ScriptedLLMServer) -> None:
    server.push(Reply.refused("no"), Reply.refused("no"), Reply.refused("no"))
    assert chat(server).choices[0].message.refusal == "no"
    r = oai(server).responses.create(model="gpt-4o", input="x")
    assert r.output[0].content[0].type == "refusal"
    assert messages(server).stop_reason == "refusal"


def test_handler_answers_when_the_queue_is_empty() -> None:
    with ScriptedLLMServer(handler=lambda req: f"request {req.number} via {req.api}") as server:
        assert chat(server).choices[0].message.content == "request 1 via chat"
        assert chat(server).choices[0].message.content == "request 2 via chat"


# -- errors, through the SDKs' own exception types ----------------------------------------------------------------


def test_openai_chat_context_overflow_body() -> None:
    with ScriptedLLMServer(["unused"], context_window=50, counter=EstimatingCounter()) as server, \
            pytest.raises(openai.BadRequestError) as info:
        chat(server, "x" * 1000)
    error = info.value
    assert error.status_code == 400
    assert error.code == "context_length_exceeded"
    tokens = server.requests[0].input_tokens
    assert f"This model's maximum context length is 50 tokens. However, your messages resulted in {tokens} tokens" \
        in error.message
    assert server.pending == 1  # the scripted reply was not consumed by the rejected request


def test_openai_responses_context_overflow_body() -> None:
    with ScriptedLLMServer(context_window=10, counter=EstimatingCounter()) as server, \
            pytest.raises(openai.BadRequestError) as info:
        oai(server).responses.create(model="gpt-4o", input="y" * 500)
    assert "Your input exceeds the context window of this model" in info.value.message
    assert info.value.code == "context_length_exceeded"


def test_anthropic_context_overflow_bodies() -> None:
    with ScriptedLLMServer(["fits"], context_window=60, counter=EstimatingCounter()) as server:
        with pytest.raises(anthropic.BadRequestError) as info:
            messages(server, "z" * 1000)
        tokens = server.requests[0].input_tokens
        assert f"prompt is too long: {tokens} tokens > 60 maximum" in info.value.message
        assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
        with pytest.raises(anthropic.BadRequestError) as info:
            messages(server, "short", max_tokens=100)
        assert "input length and `max_tokens` exceed context limit" in info.value.message
        assert messages(server, "short", max_tokens=10).content[0].text == "fits"


@pytest.mark.parametrize(
    ("error", "openai_type", "anthropic_type"),
    [
        (ErrorReply.rate_limit(), openai.RateLimitError, anthropic.RateLimitError),
        (ErrorReply.server_error(), openai.InternalServerError, anthropic.InternalServerError),
        (ErrorReply("authentication"), openai.AuthenticationError, anthropic.AuthenticationError),
    ],
)
def test_scripted_errors_raise_the_sdk_error_types(error: ErrorReply, openai_type: type[Exception],
                                                   anthropic_type: type[Exception]) -> None:
    with ScriptedLLMServer([error, error]) as server:
        with pytest.raises(openai_type):
            chat(server)
        with pytest.raises(anthropic_type):
            messages(server)
    assert [r.status for r in server.requests] == [error.status, error.status]


def test_anthropic_overloaded_is_529() -> None:
    with ScriptedLLMServer([ErrorReply("overloaded")]) as server, pytest.raises(anthropic.APIStatusError) as info:
        messages(server)
    assert info.value.status_code == 529
    assert info.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


def test_running_out_of_script_is_a_500_that_says_so(server: ScriptedLLMServer) -> None:
    with pytest.raises(openai.InternalServerError, match="no scripted reply left"):
        chat(server)


def test_unknown_path_is_a_404(server: ScriptedLLMServer) -> None:
    with pytest.raises(openai.NotFoundError):
        oai(server).embeddings.create(model="text-embedding-3-small", input="x")


def test_chat_streams_that_the_sdk_puts_back_together(server: ScriptedLLMServer) -> None:
    server.push(Reply.calling(ScriptedToolCall("bash", {"cmd": "ls -la /tmp"}, id="call_1"), text="Looking around."))
    with oai(server).chat.completions.stream(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}],
                                             stream_options={"include_usage": True}) as stream:
        chunks = list(stream)
        final = stream.get_final_completion()
    assert len(chunks) > 5  # the text and the arguments come in pieces
    message = final.choices[0].message
    assert message.content == "Looking around." and final.choices[0].finish_reason == "tool_calls"
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []] == [
        ("call_1", "bash", '{"cmd": "ls -la /tmp"}')]
    assert final.usage is not None and final.usage.prompt_tokens == server.requests[0].input_tokens


def test_responses_and_messages_stream_what_they_answer_whole(server: ScriptedLLMServer) -> None:
    server.push("the answer is 42", Reply.calling(ScriptedToolCall("grep", {"pattern": "x"}, id="call_9")))
    with oai(server).responses.stream(model="gpt-4o-mini", input="q") as stream:
        kinds = [event.type for event in stream]
        response = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert response.output_text == "the answer is 42" and response.usage is not None
    with ant(server).messages.stream(model="claude-haiku-4-5", max_tokens=100,
                                     messages=[{"role": "user", "content": "q"}]) as astream:
        message = astream.get_final_message()
    assert message.stop_reason == "tool_use"
    assert [(b.type, b.input) for b in message.content] == [("tool_use", {"pattern": "x"})]


def test_an_overflow_is_answered_before_any_stream(server: ScriptedLLMServer) -> None:
    server.context_window = 5
    with pytest.raises(openai.BadRequestError, match="maximum context length is 5 tokens"):
        chat(server, "a question far longer than five tokens of context", stream=True)


# -- validation ---------------------------------------------------------------------------------------------------


def _no_orphans(api: str, body: Any) -> None:
    items = body.get("messages") or []
    calls = {c["id"] for m in items for c in m.get("tool_calls") or []}
    for i, m in enumerate(items):
        if m.get("role") == "tool" and m.get("tool_call_id") not in calls:
            raise ValueError(f"messages[{i}]: tool result {m.get('tool_call_id')!r} has no tool call")


def test_validator_rejects_invalid_requests_with_a_400() -> None:
    with ScriptedLLMServer(["ok"], validator=_no_orphans) as server:
        with pytest.raises(openai.BadRequestError, match="has no tool call"):
            oai(server).chat.completions.create(
                model="m", messages=[{"role": "tool", "tool_call_id": "call_1", "content": "orphan"}])
        assert chat(server).choices[0].message.content == "ok"
    assert [r.invalid is not None for r in server.requests] == [True, False]
    assert len(server.invalid_requests) == 1


def test_formats_validator_is_required_when_asked_for() -> None:
    try:
        import contextfold.formats.openai_chat  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            ScriptedLLMServer(validator="formats").start()
        with ScriptedLLMServer(["ok"], validator="auto") as server:  # "auto" degrades to no validation
            assert chat(server).choices[0].message.content == "ok"
        return
    with ScriptedLLMServer(["ok"], validator="formats") as server:
        assert chat(server).choices[0].message.content == "ok"
    assert server.invalid_requests == []


# -- concurrency and lifecycle ------------------------------------------------------------------------------------


def test_concurrent_clients_are_all_recorded(server: ScriptedLLMServer) -> None:
    server.push(*[f"r{i}" for i in range(8)])
    answers: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        text = chat(server).choices[0].message.content
        with lock:
            answers.append(text)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    recorded = server.wait_for_requests(8)
    for t in threads:
        t.join()
    assert sorted(answers) == sorted(f"r{i}" for i in range(8))
    assert sorted(r.number for r in recorded) == list(range(1, 9))


def test_url_needs_a_running_server() -> None:
    server = ScriptedLLMServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.url
    with server:
        assert server.url.startswith("http://127.0.0.1:")
    with pytest.raises(RuntimeError):
        _ = server.base_url
