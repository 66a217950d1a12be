"""The provider clients against the scripted server, through the real SDKs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import anthropic
import openai
import pytest

from contextfold.errors import ConfigError, ContextOverflowError, MissingExtra
from contextfold.providers import get_provider
from contextfold.providers.anthropic import AnthropicProvider
from contextfold.providers.base import overflow_from_message
from contextfold.providers.openai import OpenAIProvider
from contextfold.summarize import ChatProvider, Completion
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import ErrorReply, Reply
from contextfold.tokens import EstimatingCounter

USER = [{"role": "user", "content": "summarize this"}]


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(counter=EstimatingCounter()) as s:
        yield s


def providers(server: ScriptedLLMServer) -> dict[str, ChatProvider]:
    return {
        "chat": get_provider("openai:gpt-4o-mini", base_url=server.base_url, api_key="test", max_retries=0),
        "responses": get_provider("openai-responses:gpt-4o-mini", base_url=server.base_url, api_key="test",
                                  max_retries=0),
        "messages": get_provider("anthropic:claude-haiku-4-5", base_url=server.url, api_key="test", max_retries=0),
    }


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_complete_normalizes_each_api(server: ScriptedLLMServer, api: str) -> None:
    provider = providers(server)[api]
    server.push("a summary", "x " * 200, Reply.refused("I can't"))
    done = provider.complete("system prompt", USER, max_tokens=40, temperature=0.0, seed=3)
    assert isinstance(done, Completion)
    assert (done.text, done.finish_reason, done.refusal) == ("a summary", "stop", None)
    assert done.input_tokens == server.requests[0].input_tokens and done.output_tokens
    cut = provider.complete("s", USER, max_tokens=10)
    assert cut.finish_reason == "length"
    refused = provider.complete("s", USER, max_tokens=10)
    assert refused.finish_reason == "refusal" and refused.refusal
    body = server.requests[0].body
    assert body.get("temperature", 0.0) == 0.0  # Anthropic's current API takes no temperature
    assert server.requests[0].max_tokens == 40
    assert ("system prompt" in str(body.get("messages"))) or body.get("instructions") == "system prompt" or \
        body.get("system") == "system prompt"
    assert server.requests[0].api == api


def test_openai_chat_sends_the_seed_and_the_chosen_token_parameter(server: ScriptedLLMServer) -> None:
    server.push("one", "two")
    OpenAIProvider("m", base_url=server.base_url, api_key="t", max_retries=0).complete("s", USER, max_tokens=5,
                                                                                      seed=9)
    OpenAIProvider("m", base_url=server.base_url, api_key="t", max_retries=0,
                   token_param="max_completion_tokens").complete("s", USER, max_tokens=6)
    first, second = (r.body for r in server.requests)
    assert (first["seed"], first["max_tokens"]) == (9, 5)
    assert second["max_completion_tokens"] == 6 and "max_tokens" not in second
    assert first["messages"][0] == {"role": "system", "content": "s"}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_context_overflow_becomes_context_overflow_error(api: str) -> None:
    with ScriptedLLMServer(context_window=20, counter=EstimatingCounter()) as server:
        provider = providers(server)[api]
        with pytest.raises(ContextOverflowError) as info:
            provider.complete("s", [{"role": "user", "content": "q" * 400}], max_tokens=5)
    error = info.value
    assert error.provider is not None and error.provider.split(":")[0] in {"openai", "anthropic"}
    if api != "responses":  # the Responses API names no counts
        assert (error.prompt_tokens, error.limit) == (server.requests[0].input_tokens, 20)
    assert isinstance(error.__cause__, openai.BadRequestError | anthropic.BadRequestError)


def test_other_errors_pass_through_as_the_sdk_raised_them(server: ScriptedLLMServer) -> None:
    server.push(ErrorReply.server_error(), ErrorReply.rate_limit(), ErrorReply("invalid_request", "bad field"))
    p = providers(server)
    with pytest.raises(openai.InternalServerError):
        p["chat"].complete("s", USER, max_tokens=5)
    with pytest.raises(anthropic.RateLimitError):
        p["messages"].complete("s", USER, max_tokens=5)
    with pytest.raises(openai.BadRequestError, match="bad field"):
        p["responses"].complete("s", USER, max_tokens=5)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_async_complete(server: ScriptedLLMServer, api: str) -> None:
    provider = providers(server)[api]
    server.push("async answer")
    done = asyncio.run(provider.acomplete("s", USER, max_tokens=20))  # type: ignore[attr-defined]
    assert done.text == "async answer"


def test_get_provider_rejects_bad_specs() -> None:
    with pytest.raises(ConfigError, match="vendor:model"):
        get_provider("gpt-4o")
    with pytest.raises(ConfigError, match="unknown provider 'acme'"):
        get_provider("acme:model")
    with pytest.raises(ConfigError) as info:
        get_provider("openai:")
    assert info.value.field == "provider"


def test_get_provider_builds_the_named_client() -> None:
    provider = get_provider("anthropic:claude-sonnet-4-5", api_key="k")
    assert isinstance(provider, AnthropicProvider) and provider.model == "claude-sonnet-4-5"
    assert isinstance(provider, ChatProvider)
    responses = get_provider("openai-responses:gpt-4.1")
    assert isinstance(responses, OpenAIProvider) and responses.api == "responses"


def test_litellm_without_the_extra_names_the_install_command() -> None:
    try:
        import litellm  # noqa: F401
    except ImportError:
        with pytest.raises(MissingExtra, match=r"pip install 'contextfold\[litellm\]'"):
            get_provider("litellm:gpt-4o-mini")
    else:
        assert get_provider("litellm:gpt-4o-mini").model == "gpt-4o-mini"  # type: ignore[attr-defined]


def test_openai_provider_rejects_an_unknown_api() -> None:
    with pytest.raises(ValueError, match="api"):
        OpenAIProvider("m", api="completions")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("message", "prompt", "limit"),
    [
        ("This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
         "Please reduce the length of the messages.", 130512, 128000),
        ("prompt is too long: 210000 tokens > 200000 maximum", 210000, 200000),
        ("input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000, decrease input length or "
         "`max_tokens` and try again", 195000, 200000),
        ("Your input exceeds the context window of this model. Please adjust your input and try again.", None, None),
    ],
)
def test_overflow_from_message_reads_the_counts(message: str, prompt: int | None, limit: int | None) -> None:
    error = overflow_from_message(message, "p")
    assert error is not None
    assert (error.prompt_tokens, error.limit, error.provider) == (prompt, limit, "p")


def test_overflow_from_message_ignores_other_errors() -> None:
    assert overflow_from_message("Rate limit reached for requests") is None
