"""Every overflow wording a wrapper quotes is still an overflow; only a refused value's echo is not (review of s20g).

s20g took an overflow wording said only inside quotes as an overflow only when the quote held the request's count:
a real refusal without one quoted by a wrapper (``{exc!r}``, SageMaker's ``with message "..."``, a gateway's
``Upstream returned 400: "..."``) was no longer read — Bedrock's "Input is too long for requested model", Ollama's,
llama.cpp's, OpenAI's "Your input exceeds the context window", DashScope's, Moonshot's — and issue 17's oversized
request was sent again unchanged. What a9a74c5 read, it reads (without figures when quoted); what is no overflow is an
error coded for another cause (``invalid_value``) or a quote the error marks as a value it refused ("Invalid value:
'...'", "'...' is not valid ...", "the value '...' is not valid for this field").
"""

from __future__ import annotations

import pytest

from contextfold.recovery import parse_overflow

# Each provider's wording alone and what a9a74c5 read from it: (limit, prompt tokens).
WORDINGS: dict[str, tuple[int | None, int | None]] = {
    "Input is too long for requested model.": (None, None),
    "input length exceeds the context length": (None, None),
    "the request exceeds the available context size, try increasing it": (None, None),
    "Your input exceeds the context window of this model. Please adjust your input and try again.": (None, None),
    "This model's maximum context length is 8192 tokens.": (8192, None),
    "Range of input length should be [1, 30720]": (30720, None),
    "<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, 30720]": (30720, None),
    "Model max length exceeded, max length: 8192": (8192, None),
    "Too many input tokens": (None, None),
    "context length exceeded": (None, None),
    "prompt is too long: 210000 tokens > 200000 maximum": (200000, 210000),
    "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.":
        (8192, 9000),
    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).": (1048576, 1200000),
    "The input token count exceeds the maximum number of tokens allowed 1048576.": (1048576, None),
}


def _repr(message: str) -> object:
    return RuntimeError(f"upstream call failed: {message!r}")


def _sagemaker(message: str) -> object:
    return Exception("An error occurred (ModelError) when calling the InvokeEndpoint operation: Received client error "
                     f'(400) from primary with message "{message}". See https://example.invalid/ in account 1 for '
                     "more information.")


def _gateway(message: str) -> object:
    return {"error": {"message": f'Upstream returned 400: "{message}"', "type": "upstream_error"}}


WRAPPERS = {"repr": _repr, "sagemaker": _sagemaker, "gateway": _gateway}


def _read(error: object) -> tuple[int | None, int | None] | None:
    read = parse_overflow(error)
    return None if read is None else (read.limit, read.prompt_tokens)


@pytest.mark.parametrize("wording", sorted(WORDINGS))
def test_a_providers_wording_is_read_with_its_figures(wording: str) -> None:
    assert _read(wording) == WORDINGS[wording]


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("wording", sorted(WORDINGS))
def test_a_wrapper_quoting_a_refusal_is_an_overflow_without_figures(wrapper: str, wording: str) -> None:
    # (s20g: None for every wording without the request's count: the same request sent again)
    assert _read(WRAPPERS[wrapper](wording)) == (None, None)


@pytest.mark.parametrize("wording", sorted(WORDINGS))
def test_an_error_coded_for_another_cause_is_no_overflow(wording: str) -> None:
    body = {"error": {"message": wording, "type": "invalid_request_error", "code": "invalid_value",
                      "param": "messages"}}
    assert _read(body) is None  # (a9a74c5: read as an overflow; the change s20g meant)


ECHOES = {
    "invalid-value": "Invalid value: \"{}\". Supported values are: 'text', 'image_url'.",
    "schema": "Invalid schema for function 'report': In context=('properties', 'reason'), \"{}\" is not valid under "
              "any of the given schemas.",
    "not-of-type": "Invalid 'messages[1].content': \"{}\" is not of type 'array'.",
    "anthropic-field": "messages.1.content.0.text: the value \"{}\" is not valid for this field",
}


@pytest.mark.parametrize("echo", sorted(ECHOES))
@pytest.mark.parametrize("wording", sorted(WORDINGS))
def test_a_refused_value_echoed_is_no_overflow(echo: str, wording: str) -> None:
    body = {"error": {"message": ECHOES[echo].format(wording), "type": "invalid_request_error"}}
    assert _read(body) is None
