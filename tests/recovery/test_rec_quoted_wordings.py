"""A token or byte limit is read from the provider's words, never from the client's text the error quotes.

OpenAI echoes an invalid value whole in its 400 ("Invalid value: '...'. Supported values are: ..."): a client whose
value said "maximum context length is 5 tokens" or "request too large (max 1 MB)" had it read as the provider's
limit, and the proxy kept it for every caller of the model. The item-count wordings were read unquoted since the
seventeenth stop; the token and byte wordings are now too (``recovery._quoted``, one pass, at most 8,192 characters).
A token or byte wording said only inside quotes is still a limit, without figures: recovery is never lost (a gateway
quoting its upstream's message, ``{exc!r}``, SageMaker's ``with message "..."``; review of s18) — unless the error marks
the quote as a value it refused ("Invalid value: '...'"): the client's text echoed (s20: ``test_rec_echoed_overflow``,
``test_rec_wrapped_wordings``).
"""

from __future__ import annotations

import pytest

from contextfold.media import parse_media_limit
from contextfold.recovery import parse_overflow

NONCE = "r18-quoted-Tq4w"
SUPPORTED = "Supported values are: 'low', 'high' and 'auto'."
# Characters of an echo past the longest text read unquoted (recovery._quoted.MAX_UNQUOTED_CHARS, 8,192).
PAST_THE_CAP = 10_000


def test_a_token_limit_in_an_echoed_value_is_no_overflow() -> None:
    echo = f"Invalid value: 'maximum context length is 5 tokens {NONCE}'. {SUPPORTED}"
    # (08dd6b2: limit 5; a9a74c5: an overflow without figures, the session shrunk 15%: an echo is no refusal, s20)
    assert parse_overflow({"error": {"message": echo, "type": "invalid_request_error"}}) is None


OPENAI = (f"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens "
          f"({NONCE}). Please reduce the length of the messages.")
ANTHROPIC = f"prompt is too long: 208310 tokens > 200000 maximum ({NONCE})"
ONLY_QUOTED = {
    "gateway": f'Upstream returned 400: "{OPENAI}"',  # an HTTP client quoting its upstream's message
    # a framework re-raising with the SDK error's repr in its text, no __cause__ kept
    "repr": "LLM call failed: " + repr(Exception("Error code: 400 - " + str(
        {"type": "error", "error": {"type": "invalid_request_error", "message": ANTHROPIC}}))),
    "aws-key": str({"Error": {"Message": ANTHROPIC, "Code": "ValidationException"}}),  # (capitalised key)
    "sagemaker": ("An error occurred (ModelError) when calling the InvokeEndpoint operation: Received client error "
                  f'(400) from primary with message "{OPENAI}". See https://console/cloudwatch for more information.'),
    "KeyError": str(KeyError(ANTHROPIC)),
}


@pytest.mark.parametrize("name", sorted(ONLY_QUOTED))
def test_a_providers_wording_said_only_in_quotes_is_still_an_overflow(name: str) -> None:
    assert parse_overflow(ONLY_QUOTED[name]) is not None  # (8c274dd: None; 08dd6b2: read with figures)


def test_the_providers_own_wordings_still_read_with_quotes_around_them() -> None:
    wrapped = ("Error code: 400 - {'error': {'message': \"This model's maximum context length is 8192 tokens. "
               "However, your messages resulted in 9000 tokens.\", 'type': 'invalid_request_error'}}")
    read = parse_overflow(wrapped)
    assert read is not None and (read.limit, read.prompt_tokens) == (8192, 9000)
    back_quoted = parse_overflow("input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000")
    assert back_quoted is not None and back_quoted.limit == 200000


def test_an_overflow_wording_past_the_cap_gives_no_figure() -> None:
    echo = f"maximum context length is 5 tokens {NONCE} " + "x" * PAST_THE_CAP
    read = parse_overflow(echo)
    assert read is not None and read.limit is None  # (08dd6b2: 5)


def test_a_byte_limit_in_an_echoed_value_gives_no_figure() -> None:
    echo = f"Invalid value: 'request too large (max 1 MB) {NONCE}'. {SUPPORTED}"
    read = parse_media_limit({"error": {"message": echo, "type": "invalid_request_error"}})
    assert read is not None and (read.kind, read.limit) == ("bytes", None)  # (08dd6b2: 1 MB)
    said = parse_media_limit("request too large (max 32 MB)")
    assert said is not None and said.limit == 32_000_000


def test_an_httpx_413_is_a_byte_limit() -> None:
    # httpx's str(HTTPStatusError) puts the reason phrase in single quotes; its response is no Mapping (no status).
    httpx = pytest.importorskip("httpx")
    request = httpx.Request("POST", f"https://gateway.example/{NONCE}/v1/messages")
    response = httpx.Response(413, request=request, text="<html><h1>413 Request Entity Too Large</h1></html>")
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        read = parse_media_limit(exc)
    assert read is not None and (read.kind, read.limit) == ("bytes", None)  # (8c274dd: None; 08dd6b2: bytes)
