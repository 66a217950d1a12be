"""A token or byte limit is read from the provider's words, never from the client's text the error quotes.

OpenAI echoes an invalid value whole in its 400 ("Invalid value: '...'. Supported values are: ..."): a client whose
value said "maximum context length is 5 tokens" or "request too large (max 1 MB)" had it read as the provider's
limit, and the proxy kept it for every caller of the model. The item-count wordings were read unquoted since the
seventeenth stop; the token and byte wordings are now too (``recovery._quoted``, one pass, at most 8,192 characters).
"""

from __future__ import annotations

from contextfold.media import parse_media_limit
from contextfold.recovery import parse_overflow

NONCE = "r18-quoted-Tq4w"
SUPPORTED = "Supported values are: 'low', 'high' and 'auto'."
# Characters of an echo past the longest text read unquoted (recovery._quoted.MAX_UNQUOTED_CHARS, 8,192).
PAST_THE_CAP = 10_000


def test_a_token_limit_in_an_echoed_value_is_no_overflow() -> None:
    echo = f"Invalid value: 'maximum context length is 5 tokens {NONCE}'. {SUPPORTED}"
    assert parse_overflow({"error": {"message": echo, "type": "invalid_request_error"}}) is None  # (08dd6b2: 5)


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


def test_a_byte_limit_in_an_echoed_value_is_no_media_limit() -> None:
    echo = f"Invalid value: 'request too large (max 1 MB) {NONCE}'. {SUPPORTED}"
    assert parse_media_limit({"error": {"message": echo, "type": "invalid_request_error"}}) is None  # (08dd6b2: 1 MB)
    said = parse_media_limit("request too large (max 32 MB)")
    assert said is not None and said.limit == 32_000_000
