"""A provider's error that is not well-formed JSON, or states absurd figures, never crashes the recovery.

Found by feeding ``call_with_recovery`` hostile error bodies (red team, session 11). The error a broken proxy or a
hostile server answers with became contextfold's own crash, hiding the provider's error from the agent:

- a count of 5,000 digits (``prompt is too long: 999…9 tokens > 200000 maximum``) raised ``ValueError: Exceeds the
  limit (4300 digits) for integer string conversion`` from ``parse_overflow``;
- a body of nested brackets (``[[[[…``, an error page cut or forged) raised ``RecursionError`` from the JSON reader;
- a limit of 400 digits (in the text, or llama.cpp's ``n_ctx`` field) parsed, then raised ``OverflowError: int too
  large to convert to float`` while the limit was learned;
- a media error naming ``max 1e400 MB`` raised ``OverflowError`` (``int(float('inf'))``);
- a limit of 0 tokens, or a negative ``n_ctx``, was taken at its word: recovery dropped the whole history down to
  the latest request to fit "0 tokens". A figure no provider can mean is read as absent (the recovery then drops
  its usual share, as for an error without figures).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold import ContextManager, call_with_recovery
from contextfold.errors import RecoveryFailed
from contextfold.messages import Message
from contextfold.recovery import parse_limit_error, parse_overflow

NONCE = "rt11-figures-8d1e"
HUGE = "9" * 5000
WIDE = "9" * 400


class ProviderError(Exception):
    """An SDK's 400 with its body, as openai's and anthropic's errors carry it."""

    def __init__(self, body: object) -> None:
        super().__init__("Error code: 400")
        self.status_code = 400
        self.body = body


HOSTILE: dict[str, object] = {
    "count_of_5000_digits": f"prompt is too long: {HUGE} tokens > 200000 maximum",
    "nested_brackets": "[" * 5000,
    "nested_objects_then_wording": '{"error": ' * 3000 + '"context length exceeded"' + "}" * 3000,
    "n_ctx_of_400_digits": '{"error": {"message": "context length exceeded", "n_ctx": ' + WIDE + "}}",
    "limit_of_400_digits": f"prompt is too long: 300000 tokens > {WIDE} maximum",
    "media_limit_of_1e400_mb": f"Request too large (max {WIDE} MB)",
    "media_items_of_5000_digits": f"Too much media: 0 document pages + 103 images > {HUGE}",
}


@pytest.mark.parametrize("body", HOSTILE.values(), ids=list(HOSTILE))
def test_reading_a_hostile_error_never_raises(body: object) -> None:
    parse_limit_error(ProviderError(body))
    parse_limit_error(body)


def _manager(name: str) -> ContextManager:
    cm = ContextManager(model="gpt-4o", store="memory", session_id=f"{NONCE}-{name}")
    history = [Message("user" if i % 2 == 0 else "assistant", f"{NONCE} turn {i} " + "word " * 200)
               for i in range(40)]
    cm.add([Message("system", "You are helpful."), *history, Message("user", f"{NONCE} last question")])
    return cm


@pytest.mark.parametrize("body", HOSTILE.values(), ids=list(HOSTILE))
def test_the_recovery_retries_or_gives_up_it_never_crashes(body: object) -> None:
    cm = _manager("crash")
    calls: list[int] = []

    def call(view: list[dict[str, Any]]) -> str:
        calls.append(len(view))
        if len(calls) == 1:
            raise ProviderError(body)
        return "answered"

    try:
        assert call_with_recovery(cm, call) == "answered"
    except (RecoveryFailed, ProviderError):
        pass
    finally:
        cm.close()


@pytest.mark.parametrize("body", [
    "prompt is too long: 300000 tokens > 0 maximum",
    {"error": {"message": "context length exceeded", "n_ctx": -5}},
    {"error": {"message": "context length exceeded", "n_ctx": 0}},
], ids=["limit_0_in_text", "n_ctx_negative", "n_ctx_0"])
def test_a_limit_no_provider_can_mean_is_read_as_absent(body: object) -> None:
    info = parse_overflow(json.dumps(body) if isinstance(body, dict) else body)
    assert info is not None and info.limit is None
    cm = _manager("zero")
    sent: list[list[dict[str, Any]]] = []

    def call(view: list[dict[str, Any]]) -> str:
        sent.append(view)
        if len(sent) == 1:
            raise ProviderError(body)
        return "answered"

    try:
        assert call_with_recovery(cm, call) == "answered"
    finally:
        cm.close()
    assert len(sent[1]) > 3  # a share dropped, not all but the instructions and the latest request


def test_plausible_figures_are_still_read() -> None:
    info = parse_overflow("prompt is too long: 210000 tokens > 200000 maximum")
    assert info is not None and (info.prompt_tokens, info.limit) == (210000, 200000)
    info = parse_overflow({"error": {"message": "the request exceeds the available context size",
                                     "n_ctx": 4096, "n_prompt_tokens": 5000}})
    assert info is not None and (info.prompt_tokens, info.limit) == (5000, 4096)
    media = parse_limit_error("Too much media: 0 document pages + 103 images > 100")
    assert media is not None and (media.limit, media.sent) == (100, 103)
