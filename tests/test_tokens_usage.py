"""TokenUsage parsing of each provider's usage shape, and usage-grounded estimates with calibration."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold.messages import Message
from contextfold.tokens import EstimatingCounter, MessageCounter, TiktokenCounter, TokenUsage, UsageTracker

# Shapes as the APIs return them (values from real responses, trimmed to the usage part).
OPENAI_CHAT = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
}
OPENAI_RESPONSES = {
    "input_tokens": 36,
    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
    "output_tokens": 87,
    "output_tokens_details": {"reasoning_tokens": 64},
    "total_tokens": 123,
}
ANTHROPIC = {
    "input_tokens": 21,
    "cache_creation_input_tokens": 188086,
    "cache_read_input_tokens": 0,
    "output_tokens": 393,
    "service_tier": "standard",
}
GEMINI_RESPONSE = {
    "candidates": [{"content": {"parts": [{"text": "hi"}], "role": "model"}}],
    "usageMetadata": {
        "promptTokenCount": 1200,
        "candidatesTokenCount": 45,
        "cachedContentTokenCount": 1000,
        "thoughtsTokenCount": 30,
        "totalTokenCount": 1275,
    },
}


def test_openai_chat_usage_splits_cached_tokens() -> None:
    usage = TokenUsage.from_openai(OPENAI_CHAT)
    assert usage == TokenUsage(input=86, output=300, cache_read=1920)
    assert usage.prompt_tokens == 2006
    assert usage.total == OPENAI_CHAT["total_tokens"]


def test_openai_responses_usage() -> None:
    usage = TokenUsage.from_openai(OPENAI_RESPONSES)
    assert usage == TokenUsage(input=36, output=87)
    assert usage.total == OPENAI_RESPONSES["total_tokens"]


def test_openai_cache_writes_are_their_own_figure() -> None:
    raw = {**OPENAI_RESPONSES, "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 20}}
    assert TokenUsage.from_openai(raw) == TokenUsage(input=6, output=87, cache_creation=20, cache_read=10)


def test_anthropic_usage_keeps_cache_writes_apart() -> None:
    usage = TokenUsage.from_anthropic(ANTHROPIC)
    assert usage == TokenUsage(input=21, output=393, cache_creation=188086, cache_read=0)
    assert usage.prompt_tokens == 21 + 188086


def test_gemini_usage_counts_thoughts_as_output() -> None:
    usage = TokenUsage.from_gemini(GEMINI_RESPONSE)
    assert usage == TokenUsage(input=200, output=75, cache_read=1000)
    assert usage.total == GEMINI_RESPONSE["usageMetadata"]["totalTokenCount"]  # type: ignore[index]
    snake = {"prompt_token_count": 10, "candidates_token_count": 3}
    assert TokenUsage.from_gemini(snake) == TokenUsage(input=10, output=3)


def test_sdk_objects_parse_like_dicts() -> None:
    from anthropic.types import Usage as AnthropicUsage
    from openai.types import CompletionUsage
    from openai.types.responses import ResponseUsage

    assert TokenUsage.from_openai(CompletionUsage.model_validate(OPENAI_CHAT)) == TokenUsage.from_openai(OPENAI_CHAT)
    assert TokenUsage.from_any(ResponseUsage.model_validate(OPENAI_RESPONSES)) == TokenUsage(input=36, output=87)
    assert TokenUsage.from_any(AnthropicUsage.model_validate(ANTHROPIC)) == TokenUsage.from_anthropic(ANTHROPIC)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (OPENAI_CHAT, TokenUsage(input=86, output=300, cache_read=1920)),
        ({"usage": OPENAI_CHAT, "id": "chatcmpl-1"}, TokenUsage(input=86, output=300, cache_read=1920)),
        (OPENAI_RESPONSES, TokenUsage(input=36, output=87)),
        (ANTHROPIC, TokenUsage(input=21, output=393, cache_creation=188086)),
        ({"id": "msg_1", "usage": ANTHROPIC}, TokenUsage(input=21, output=393, cache_creation=188086)),
        (GEMINI_RESPONSE, TokenUsage(input=200, output=75, cache_read=1000)),
        (GEMINI_RESPONSE["usageMetadata"], TokenUsage(input=200, output=75, cache_read=1000)),
        ({"input_tokens": 5, "output_tokens": 2}, TokenUsage(input=5, output=2)),
    ],
)
def test_from_any_recognises_each_shape(raw: Any, expected: TokenUsage) -> None:
    assert TokenUsage.from_any(raw) == expected


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (None, "got None"),
        ({"foo": 1}, "unrecognised usage shape"),
        ({"prompt_tokens": "lots", "completion_tokens": 1}, r"openai\.prompt_tokens: expected a non-negative integer"),
        ({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}}, "cached_tokens"),
        ({"input_tokens": -1, "cache_read_input_tokens": 0}, r"anthropic\.input_tokens"),
    ],
)
def test_bad_usage_names_the_field(raw: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TokenUsage.from_any(raw)


@given(*(st.integers(min_value=0, max_value=10**9) for _ in range(4)))
def test_total_is_the_sum_and_addition_is_fieldwise(a: int, b: int, c: int, d: int) -> None:
    usage = TokenUsage(a, b, c, d)
    assert usage.total == a + b + c + d
    assert (usage + usage).total == 2 * usage.total
    assert TokenUsage.from_any(usage) is usage


# ---- tracking -------------------------------------------------------------------------------------------------------


def conversation(n: int) -> list[Message]:
    return [Message.user(f"question {i} " * 10) if i % 2 == 0 else Message.assistant(f"answer {i}") for i in range(n)]


def test_estimate_is_reported_prefix_plus_new_messages_only() -> None:
    counter = MessageCounter(TiktokenCounter())
    tracker = UsageTracker(counter)
    sent = conversation(10)
    assert tracker.estimate(sent) == counter.count_messages(sent)  # nothing reported yet
    tracker.record({"prompt_tokens": 5000, "completion_tokens": 10}, sent)
    new = [Message.assistant("the reply"), Message.user("next question")]
    assert tracker.estimate([*sent, *new]) == 5000 + sum(counter.count_message(m) for m in new)
    assert tracker.estimate(sent) == 5000


def test_estimate_falls_back_to_counting_when_the_history_changed() -> None:
    counter = MessageCounter(TiktokenCounter())
    tracker = UsageTracker(counter)
    sent = conversation(10)
    tracker.record({"prompt_tokens": 5000, "completion_tokens": 10}, sent)
    compacted = [Message.user("summary of the first part"), *sent[6:]]
    assert tracker.estimate(compacted) == counter.count_messages(compacted)
    tracker.reset()
    assert tracker.estimate(sent) == counter.count_messages(sent)


def test_calibration_converges_towards_the_reported_ratio() -> None:
    inner = EstimatingCounter(4.0)
    counter = MessageCounter(inner, format="anthropic")
    tracker = UsageTracker(counter)
    sent = conversation(20)
    true_tokens = round(counter.count_messages(sent) * 1.3)  # the provider says we under-count by 30 %
    for _ in range(15):
        tracker.record({"input_tokens": true_tokens, "output_tokens": 1}, sent)
    assert 1.2 < tracker.calibration < 1.4
    assert abs(counter.count_messages(sent) - true_tokens) / true_tokens < 0.08
    assert tracker.calls == 15
    assert tracker.totals.input == 15 * true_tokens


def test_exact_counters_are_not_calibrated() -> None:
    tracker = UsageTracker(MessageCounter(TiktokenCounter()))
    tracker.record({"prompt_tokens": 99999, "completion_tokens": 1}, conversation(4))
    assert tracker.calibration == 1.0


def test_small_differences_leave_the_cache_alone() -> None:
    inner = EstimatingCounter()
    counter = MessageCounter(inner)
    tracker = UsageTracker(counter)
    sent = conversation(6)
    estimated = counter.count_messages(sent)
    tracker.record({"prompt_tokens": estimated + 1, "completion_tokens": 1}, sent)
    assert inner.revision == 0
