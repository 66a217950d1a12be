"""A code says what its own error means, not what a chained one does (review of s20g).

s20g gathered provider codes from a whole exception chain: a fallback whose first model refused a parameter
(``code: unsupported_value``) and whose second model refused the request's length (Anthropic's "prompt is too long:
210000 tokens > 200000 maximum", no code) read no overflow, and the caller got the refusal instead of a retry. A
code is read only against the text of the exception or body that carried it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai
from _rec_history import history, session

from contextfold.recovery import call_with_recovery, parse_overflow
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import ErrorReply

UNSUPPORTED = ErrorReply("invalid_request", code="unsupported_value", message=(
    "Unsupported value: 'reasoning_effort' does not support 'minimal' with this model."))
TOO_LONG = ErrorReply("context_overflow", prompt_tokens=210_000, limit=200_000)


class ProviderError(Exception):
    def __init__(self, message: str, body: dict[str, Any]) -> None:
        super().__init__(message)
        self.body = body


def test_a_fallbacks_overflow_under_another_models_refusal_is_read() -> None:
    refused = {"error": {"message": "Unsupported value: 'reasoning_effort' does not support 'minimal' with this "
                                    "model.", "type": "invalid_request_error", "param": "reasoning_effort",
                         "code": "unsupported_value"}}
    too_long = {"type": "error", "error": {"type": "invalid_request_error",
                                           "message": "prompt is too long: 210000 tokens > 200000 maximum"}}
    try:
        try:
            raise ProviderError("unsupported value", refused)
        except ProviderError as first:  # a fallback's second model
            raise ProviderError("overflow", too_long) from first
    except ProviderError as chained:
        error = chained
    read = parse_overflow(error)  # (s20g: None)
    assert read is not None and (read.limit, read.prompt_tokens) == (200_000, 210_000)
    # The first model's refusal alone is still no overflow.
    assert error.__cause__ is not None and parse_overflow(error.__cause__) is None


def test_a_fallback_chain_through_real_clients_recovers(tmp_path: Path) -> None:
    cm = session(tmp_path)
    cm.add(history(30, lines=60))
    with ScriptedLLMServer([UNSUPPORTED, TOO_LONG], default="ok") as server:
        primary = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        fallback = anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0)

        def call(view: dict[str, Any]) -> object:
            try:  # the primary model refuses the parameter before reading the conversation
                return primary.chat.completions.create(model="o-mini", messages=[{"role": "user", "content": "hi"}],
                                                       reasoning_effort="minimal")
            except openai.BadRequestError:
                return fallback.messages.create(model="claude-opus-4-1", max_tokens=64, **view)

        # (s20g: the fallback's anthropic.BadRequestError reached the caller, nothing shrunk)
        call_with_recovery(cm, call, format="anthropic")
    assert [r.status for r in server.requests] == [400, 400, 200]
    assert cm.learned_limit is not None
