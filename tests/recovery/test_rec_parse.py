"""parse_overflow: every provider's real context-length error, as its SDK raises it or as its server sends it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from _rec_server import error_server
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.errors import ContextOverflowError
from contextfold.recovery import OverflowInfo, parse_overflow
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import ErrorReply

USER = [{"role": "user", "content": "hi"}]

# Bodies exactly as the servers send them (status, JSON body), with what must be read from them:
# (provider, prompt_tokens, limit, max_tokens).
OPENAI_COMPATIBLE_BODIES: dict[str, tuple[int, dict[str, Any], tuple[str, int | None, int | None, int | None]]] = {
    "azure": (400, {"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages "
                                         "resulted in 9216 tokens. Please reduce the length of the messages.",
                              "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded",
                              "status": 400}}, ("openai", 9216, 8192, None)),
    "openai_functions": (400, {"error": {"message": "This model's maximum context length is 8192 tokens. However, "
                                                    "your messages resulted in 9000 tokens (8500 in the messages, "
                                                    "500 in the functions). Please reduce the length of the messages "
                                                    "or functions.", "type": "invalid_request_error",
                                         "param": "messages", "code": "context_length_exceeded"}},
                         ("openai", 9000, 8192, None)),
    "openrouter": (400, {"error": {"message": "This endpoint's maximum context length is 131072 tokens. However, you "
                                              "requested about 140210 tokens (132018 of text input, 4096 of tool "
                                              "input, 4096 in the output). Please reduce the length of either one, "
                                              "or use the \"middle-out\" transform to compress your prompt "
                                              "automatically.", "code": 400, "metadata": {"provider_name": None}}},
                   ("openai", 136114, 131072, 4096)),
    "vllm": (400, {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you "
                                                "requested 5120 tokens (4096 in the messages, 1024 in the "
                                                "completion). Please reduce the length of the messages or "
                                                "completion.", "type": "BadRequestError", "param": None,
                   "code": 400}, ("openai", 4096, 4096, 1024)),
    "vllm_max_tokens": (400, {"error": {"message": "'max_tokens' or 'max_completion_tokens' is too large: 2048. This "
                                                   "model's maximum context length is 4096 tokens and your request "
                                                   "has 3000 input tokens (2048 > 4096 - 3000). None",
                                        "type": "BadRequestError", "param": None, "code": 400}},
                        ("openai", 3000, 4096, 2048)),
    "llama.cpp": (400, {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                                          "increasing it", "type": "exceed_context_size_error",
                                  "n_prompt_tokens": 5000, "n_ctx": 4096}}, ("openai", 5000, 4096, None)),
    "ollama": (400, {"error": {"message": "the input length exceeds the context length", "type": "api_error",
                               "param": None, "code": None}}, ("openai", None, None, None)),
    "ollama_native": (500, {"error": "input length exceeds maximum context length"}, ("openai", None, None, None)),
}

# Raw bodies and messages of providers without an OpenAI-compatible SDK here: (error, provider, prompt, limit, out).
RAW: dict[str, tuple[object, str | None, int | None, int | None, int | None]] = {
    "gemini_body": ({"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of "
                                                       "tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}},
                    "gemini", 1_200_000, 1_048_576, None),
    "gemini_text": ('400 INVALID_ARGUMENT. {"error": {"code": 400, "message": "The input token count exceeds the '
                    'maximum number of tokens allowed 1048576.", "status": "INVALID_ARGUMENT"}}', "gemini", None,
                    1_048_576, None),
    "bedrock_text": ("An error occurred (ValidationException) when calling the InvokeModel operation: Input is too "
                     "long for requested model.", "bedrock", None, None, None),
    "bedrock_tokens": ("Too many input tokens. Max input tokens: 8192, request input token count: 9100", "bedrock",
                       9100, 8192, None),
    "anthropic_bytes": (b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: '
                        b'208310 tokens > 200000 maximum"},"request_id":"req_011"}', "anthropic", 208_310, 200_000,
                        None),
    "anthropic_max_tokens": ("input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease "
                             "input length or `max_tokens` and try again", "anthropic", 188_240, 200_000, 21_333),
    "openai_legacy": ("This model's maximum context length is 4097 tokens, however you requested 4927 tokens (3927 in "
                      "your prompt; 1000 for the completion). Please reduce your prompt; or completion length.",
                      "openai", 3927, 4097, 1000),
    "mistral": ("Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context "
                "length", "mistral", 40_000, 32_768, None),
    "llama.cpp_counts": ("request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it",
                         "llama.cpp", 5000, 4096, None),
    "ollama_text": ("context length exceeded", None, None, None, None),
}

NOT_OVERFLOW: list[object] = [
    "Rate limit reached for requests",
    "Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 45000. The "
    "input or output tokens must be reduced in order to run successfully.",
    "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, whereas you provided "
    "100000.",
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}},
    ValueError("bad value"),
    KeyError("maximum"),
    "",
    b"\xff\xfe",
    42,
    None,
]


def raised(call: Callable[[], object]) -> BaseException:
    with pytest.raises(Exception) as info:
        call()
    return info.value


def check(info: OverflowInfo | None, prompt: int | None, limit: int | None, out: int | None = None) -> OverflowInfo:
    assert info is not None
    assert (info.prompt_tokens, info.limit, info.max_tokens) == (prompt, limit, out)
    assert info.message
    return info


def test_openai_chat_and_responses_errors_from_the_real_sdk() -> None:
    with ScriptedLLMServer([ErrorReply.overflow(9000, 8000)] * 2) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        chat = raised(lambda: client.chat.completions.create(model="m", messages=USER))
        responses = raised(lambda: client.responses.create(model="m", input="hi"))
    info = check(parse_overflow(chat), 9000, 8000)
    assert (info.provider, info.status_code) == ("openai", 400)
    info = check(parse_overflow(responses), None, None)
    assert "context window" in info.message and info.provider == "openai"


@pytest.mark.parametrize("max_tokens", [None, 500])
def test_anthropic_errors_from_the_real_sdk(max_tokens: int | None) -> None:
    error = ErrorReply("context_overflow", prompt_tokens=9000, limit=8000, max_tokens=max_tokens)
    with ScriptedLLMServer([error]) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0)
        exc = raised(lambda: client.messages.create(model="m", max_tokens=500, messages=USER))
    info = check(parse_overflow(exc), 9000, 8000, max_tokens)
    assert info.provider == "anthropic"
    assert info.input_limit == 8000 - (max_tokens or 0)
    assert info.message.startswith(("prompt is too long", "input length"))  # the wording, not the SDK's wrapper


@pytest.mark.parametrize("name", sorted(OPENAI_COMPATIBLE_BODIES))
def test_openai_compatible_servers_through_the_real_sdk(name: str) -> None:
    status, body, (provider, prompt, limit, out) = OPENAI_COMPATIBLE_BODIES[name]
    with error_server(status, body) as url:
        if name == "azure":
            client: openai.OpenAI = openai.AzureOpenAI(azure_endpoint=url, api_key="t", api_version="2024-10-21",
                                                       max_retries=0)
        else:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="t", max_retries=0)
        exc = raised(lambda: client.chat.completions.create(model="m", messages=USER))
    assert isinstance(exc, openai.APIStatusError)
    info = check(parse_overflow(exc), prompt, limit, out)
    assert info.provider == provider and info.status_code == status
    # the body alone, as a dict and as JSON text, says the same
    check(parse_overflow(body), prompt, limit, out)
    check(parse_overflow(json.dumps(body)), prompt, limit, out)


@pytest.mark.parametrize("name", sorted(RAW))
def test_raw_bodies_and_messages(name: str) -> None:
    error, provider, prompt, limit, out = RAW[name]
    info = check(parse_overflow(error), prompt, limit, out)
    assert info.provider == provider


def test_bedrock_client_error_from_botocore() -> None:
    response: Any = {"Error": {"Code": "ValidationException", "Message": "Input is too long for requested model."},
                     "ResponseMetadata": {"HTTPStatusCode": 400}}
    info = check(parse_overflow(ClientError(response, "InvokeModel")), None, None)
    assert (info.provider, info.status_code) == ("bedrock", 400)


def test_gemini_sdk_shaped_error() -> None:
    class ClientError(Exception):  # google.genai.errors.ClientError keeps code, status, message and details
        def __init__(self, code: int, details: dict[str, Any]) -> None:
            self.code, self.details = code, details
            self.status, self.message = details["error"]["status"], details["error"]["message"]
            super().__init__(f"{code} {self.status}. {details}")

    ClientError.__module__ = "google.genai.errors"
    body = RAW["gemini_body"][0]
    assert isinstance(body, dict)
    info = check(parse_overflow(ClientError(400, body)), 1_200_000, 1_048_576)
    assert (info.provider, info.status_code) == ("gemini", 400)


def test_litellm_error_is_recognised_by_its_class_name_whatever_it_says() -> None:
    class ContextWindowExceededError(Exception):
        llm_provider = "bedrock"
        status_code = 400

    info = parse_overflow(ContextWindowExceededError("litellm.BadRequestError: the model said no"))
    assert info is not None and info.provider == "bedrock" and info.prompt_tokens is None
    counted = parse_overflow(ContextWindowExceededError("AnthropicException - prompt is too long: 12 tokens > 10 "
                                                        "maximum"))
    check(counted, 12, 10)


def test_wrapped_errors_are_followed_to_their_cause() -> None:
    try:
        try:
            raise ContextOverflowError("too long", prompt_tokens=5, limit=4, provider="x")
        except ContextOverflowError as exc:
            raise RuntimeError("the framework failed") from exc
    except RuntimeError as outer:
        check(parse_overflow(outer), 5, 4)


def test_own_error_and_provider_hint() -> None:
    info = parse_overflow(ContextOverflowError("too long", prompt_tokens=5, limit=4, provider="x"))
    assert info is not None and info.provider == "x" and info.to_error().limit == 4
    assert parse_overflow("prompt is too long: 3 tokens > 2 maximum", provider="bedrock").provider == "bedrock"  # type: ignore[union-attr]


@pytest.mark.parametrize("error", NOT_OVERFLOW, ids=lambda e: type(e).__name__ + ":" + str(e)[:30])
def test_other_errors_are_not_overflows(error: object) -> None:
    assert parse_overflow(error) is None


def test_a_rate_limit_is_never_an_overflow_even_with_an_overflow_code() -> None:
    body = {"error": {"message": "maximum context length", "code": "context_length_exceeded"}}
    with ScriptedLLMServer([ErrorReply("rate_limit", message="maximum context length is 10 tokens. However, your "
                                                             "messages resulted in 20 tokens")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        exc = raised(lambda: client.chat.completions.create(model="m", messages=USER))
    assert isinstance(exc, openai.RateLimitError)
    assert parse_overflow(exc) is None
    assert parse_overflow(body) is not None


TEMPLATES = [
    ("This model's maximum context length is {limit} tokens. However, your messages resulted in {prompt} tokens.",
     False),
    ("prompt is too long: {prompt} tokens > {limit} maximum", False),
    ("The input token count ({prompt}) exceeds the maximum number of tokens allowed ({limit}).", False),
    ("input length and `max_tokens` exceed context limit: {prompt} + {out} > {limit}, decrease input", True),
    ("This model's maximum context length is {limit} tokens. However, you requested {total} tokens ({prompt} in the "
     "messages, {out} in the completion).", True),
]


@settings(max_examples=60, deadline=None)
@given(template=st.sampled_from(TEMPLATES), prompt=st.integers(1, 10**7), limit=st.integers(1, 10**7),
       out=st.integers(0, 10**5), wrap=st.sampled_from(["text", "body", "json"]))
def test_counts_are_read_back_whatever_the_numbers(template: tuple[str, bool], prompt: int, limit: int, out: int,
                                                   wrap: str) -> None:
    text, has_out = template
    message = text.format(prompt=prompt, limit=limit, out=out, total=prompt + out)
    error: object = {"error": {"message": message}} if wrap != "text" else message
    if wrap == "json":
        error = json.dumps(error)
    check(parse_overflow(error), prompt, limit, out if has_out else None)
