"""Provider-reported token usage, and tracking that grounds estimates in it.

After a model call the provider's input count for the messages that were sent is the truth; only messages added
since are counted locally. The ratio of reported to estimated counts calibrates an estimating counter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import Message
from .counting import EstimatingCounter, MessageCounter

__all__ = ["TokenUsage", "UsageTracker"]


def _field(obj: Any, *keys: str) -> Any:
    """The first of ``keys`` present on ``obj`` (a mapping or an SDK object), else None."""
    for key in keys:
        value = obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)
        if value is not None:
            return value
    return None


def _int(obj: Any, *keys: str, where: str) -> int:
    value = _field(obj, *keys)
    if value is None:
        return 0
    if (isinstance(value, bool) or not isinstance(value, int | float) or value < 0
            or (isinstance(value, float) and not math.isfinite(value)) or value != int(value)):
        raise ValueError(f"usage: {where}.{keys[0]}: expected a non-negative integer, got {value!r}")
    return int(value)


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts of one model call, in one shape for every provider.

    ``input`` is the uncached input (OpenAI's ``prompt_tokens`` minus the cached part), so the four figures never
    overlap and ``total`` is their plain sum. ``prompt_tokens`` is everything the model read.
    """

    input: int = 0
    output: int = 0
    cache_creation: int = 0
    cache_read: int = 0

    @property
    def total(self) -> int:
        """All tokens of the call: input, output, cache creation and cache read."""
        return self.input + self.output + self.cache_creation + self.cache_read

    @property
    def prompt_tokens(self) -> int:
        """The size of the context that was sent (input plus cache writes and reads)."""
        return self.input + self.cache_creation + self.cache_read

    def __add__(self, other: TokenUsage) -> TokenUsage:
        if not isinstance(other, TokenUsage):
            return NotImplemented
        return TokenUsage(
            self.input + other.input,
            self.output + other.output,
            self.cache_creation + other.cache_creation,
            self.cache_read + other.cache_read,
        )

    # -- parsing ------------------------------------------------------------------------------------------------------
    @classmethod
    def from_openai(cls, usage: Any) -> TokenUsage:
        """From an OpenAI ``usage`` (Chat Completions or Responses; object or dict), or a response that has one."""
        inner = _field(usage, "usage")
        if inner is not None and _field(usage, "prompt_tokens", "input_tokens") is None:
            usage = inner
        if _field(usage, "prompt_tokens") is not None:
            prompt = _int(usage, "prompt_tokens", where="openai")
            output = _int(usage, "completion_tokens", where="openai")
            details = _field(usage, "prompt_tokens_details")
        else:
            prompt = _int(usage, "input_tokens", where="openai")
            output = _int(usage, "output_tokens", where="openai")
            details = _field(usage, "input_tokens_details")
        cached = written = 0
        if details is not None:
            cached = _int(details, "cached_tokens", where="openai.details")
            written = _int(details, "cache_write_tokens", where="openai.details")
        if cached + written > prompt:
            raise ValueError(
                f"usage: openai: cached_tokens + cache_write_tokens ({cached + written}) exceed the prompt ({prompt})"
            )
        return cls(input=prompt - cached - written, output=output, cache_creation=written, cache_read=cached)

    @classmethod
    def from_anthropic(cls, usage: Any) -> TokenUsage:
        """From an Anthropic Messages ``usage`` (object or dict), or a message that has one."""
        inner = _field(usage, "usage")
        if inner is not None and _field(usage, "input_tokens") is None:
            usage = inner
        return cls(
            input=_int(usage, "input_tokens", where="anthropic"),
            output=_int(usage, "output_tokens", where="anthropic"),
            cache_creation=_int(usage, "cache_creation_input_tokens", where="anthropic"),
            cache_read=_int(usage, "cache_read_input_tokens", where="anthropic"),
        )

    @classmethod
    def from_gemini(cls, usage: Any) -> TokenUsage:
        """From Gemini ``usageMetadata`` (REST camelCase or SDK snake_case), or a response that has one."""
        inner = _field(usage, "usageMetadata", "usage_metadata")
        if inner is not None:
            usage = inner
        prompt = _int(usage, "promptTokenCount", "prompt_token_count", where="gemini")
        tool_prompt = _int(usage, "toolUsePromptTokenCount", "tool_use_prompt_token_count", where="gemini")
        cached = _int(usage, "cachedContentTokenCount", "cached_content_token_count", where="gemini")
        # Thinking is billed as output but reported apart from the candidates.
        output = _int(usage, "candidatesTokenCount", "candidates_token_count", where="gemini") + _int(
            usage, "thoughtsTokenCount", "thoughts_token_count", where="gemini"
        )
        if cached > prompt:
            raise ValueError(f"usage: gemini: cachedContentTokenCount ({cached}) exceeds promptTokenCount ({prompt})")
        return cls(input=prompt - cached + tool_prompt, output=output, cache_read=cached)

    @classmethod
    def from_any(cls, usage: Any) -> TokenUsage:
        """From any provider's usage object or dict, recognised by its keys (a TokenUsage is returned as is)."""
        if isinstance(usage, TokenUsage):
            return usage
        if usage is None:
            raise ValueError("usage: got None; pass the provider's usage object or the response that carries it")
        if _field(usage, "usageMetadata", "usage_metadata", "promptTokenCount", "prompt_token_count") is not None:
            return cls.from_gemini(usage)
        inner = _field(usage, "usage")
        if inner is not None and _field(usage, "prompt_tokens", "input_tokens") is None:
            return cls.from_any(inner)
        if _field(usage, "prompt_tokens", "input_tokens_details") is not None:
            return cls.from_openai(usage)
        if _field(usage, "cache_creation_input_tokens", "cache_read_input_tokens") is not None:
            return cls.from_anthropic(usage)
        if _field(usage, "input_tokens") is not None:
            # Both shapes agree when no cache figures are given.
            return cls.from_anthropic(usage)
        raise ValueError(
            f"usage: unrecognised usage shape {type(usage).__name__}; expected OpenAI (prompt_tokens/input_tokens), "
            "Anthropic (input_tokens, cache_*_input_tokens) or Gemini (usageMetadata) fields"
        )


# How fast the calibration follows new evidence: 0.3 settles within a handful of calls yet one odd call (a huge
# image, a tool list left out) moves it by less than a third.
CALIBRATION_SMOOTHING = 0.3
# Changes below 2 % are not applied: each change drops the message counter's cache, and 2 % is within the noise.
CALIBRATION_MIN_CHANGE = 0.02


class UsageTracker:
    """Grounds token estimates in what the provider reported for the last call.

    >>> from contextfold.tokens import EstimatingCounter
    >>> tracker = UsageTracker(MessageCounter(EstimatingCounter()))
    >>> sent = [Message.user("hello there")]
    >>> _ = tracker.record({"prompt_tokens": 50, "completion_tokens": 5}, sent)
    >>> reply = Message.assistant("hi")
    >>> tracker.estimate([*sent, reply]) == 50 + tracker.counter.count_message(reply)
    True
    """

    def __init__(self, counter: MessageCounter, *, smoothing: float = CALIBRATION_SMOOTHING) -> None:
        if not 0 < smoothing <= 1:
            raise ValueError(f"smoothing: must be in (0, 1], got {smoothing!r}")
        self.counter = counter
        self.smoothing = smoothing
        self.last_usage: TokenUsage | None = None
        self.last_estimate: int | None = None
        self.totals = TokenUsage()
        self.calls = 0
        self._sent: list[str] = []

    @property
    def calibration(self) -> float:
        """The estimating counter's current correction factor (1.0 for exact counters)."""
        inner = self.counter.counter
        return inner.calibration if isinstance(inner, EstimatingCounter) else 1.0

    def record(
        self, usage: Any, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> TokenUsage:
        """Note the usage the provider reported for a call that sent ``messages`` (and ``tools``).

        Returns the parsed usage. The estimating counter, if any, is recalibrated towards reported / estimated.
        """
        parsed = TokenUsage.from_any(usage)
        estimated = self.counter.count_messages(messages) + self.counter.count_tools(tools or ())
        self.last_usage = parsed
        self.last_estimate = estimated
        self.totals = self.totals + parsed
        self.calls += 1
        self._sent = [m.fingerprint() for m in messages]
        inner = self.counter.counter
        if isinstance(inner, EstimatingCounter) and estimated > 0 and parsed.prompt_tokens > 0:
            current = inner.calibration
            target = current * parsed.prompt_tokens / estimated
            proposed = (1 - self.smoothing) * current + self.smoothing * target
            if abs(proposed - current) >= CALIBRATION_MIN_CHANGE * current:
                inner.set_calibration(proposed)
        return parsed

    def estimate(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None) -> int:
        """Tokens ``messages`` will take: the reported count of the part already sent plus the new messages.

        When ``messages`` no longer starts with what was sent (the history was compacted or edited), everything
        is counted locally, tools included.
        """
        usage = self.last_usage
        sent = self._sent
        if usage is None or not sent or len(messages) < len(sent) or not self._starts_with_sent(messages):
            return self.counter.count_messages(messages) + self.counter.count_tools(tools or ())
        new = messages[len(sent) :]
        return usage.prompt_tokens + sum(self.counter.count_message(m) for m in new)

    def reset(self) -> None:
        """Forget the last call (e.g. after the history was replaced); totals are kept."""
        self.last_usage = None
        self.last_estimate = None
        self._sent = []

    def _starts_with_sent(self, messages: Sequence[Message]) -> bool:
        return all(m.fingerprint() == fp for m, fp in zip(messages, self._sent, strict=False))
