"""The summarizer interface: what is asked, what comes back, and the one-method protocol."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Protocol, runtime_checkable

from ..messages import Message
from ..tokens import EstimatingCounter, TokenCounter

__all__ = ["DEFAULT_SUMMARY_TOKENS", "STRATEGIES", "Summarizer", "SummaryRequest", "SummaryResult", "default_counter"]

# Large enough for a dense task_state summary of a long coding session (a few hundred entities plus the user's
# requests), small enough to be a fraction of even a 16K window.
DEFAULT_SUMMARY_TOKENS = 2_000

# The built-in strategies; "custom" takes its instructions from ``SummaryRequest.custom_prompt``.
STRATEGIES: tuple[str, ...] = ("task_state", "brief", "decision_log", "code_delta", "custom")

# Summaries are measured against the tokenizer of the most common target; any model is close enough for a budget.
_BUDGET_MODEL = "gpt-4o"


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What to summarize and how.

    ``previous_summary`` is folded into the new one (rolling summaries never nest). ``summary_directives`` and
    ``retain_directives`` come from the policy and are appended as bullets; ``instructions`` are a user's manual
    request (``/compact keep the failing test names``). ``retain_prompt`` replaces the default instruction for the
    ``<retain>`` block. ``max_tokens`` bounds the summary and the retained facts
    together, since both go back into the view. ``verbatim`` holds the texts that stay in the view word for word
    beside the summary (the user messages the compaction keeps): the summary reads them for context but need not
    repeat them.
    """

    messages: tuple[Message, ...]
    previous_summary: str | None = None
    strategy: str = "task_state"
    instructions: str | None = None
    summary_directives: tuple[str, ...] = ()
    retain_directives: tuple[str, ...] = ()
    max_tokens: int = DEFAULT_SUMMARY_TOKENS
    custom_prompt: str | None = None
    retain_prompt: str | None = None
    verbatim: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """A summary and the facts to keep verbatim.

    ``fell_back`` is true when an LLM summarizer failed and the extractive one answered instead; ``warnings`` say
    why, so the manager can emit them as events.
    """

    summary: str
    retain: tuple[str, ...] = ()
    summarizer: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    fell_back: bool = False
    warnings: tuple[str, ...] = ()


@runtime_checkable
class Summarizer(Protocol):
    """Turns a slice of history into a summary. One method; implement it to plug in any model.

    Example:
        >>> class FirstLine:
        ...     def summarize(self, request: SummaryRequest) -> SummaryResult:
        ...         return SummaryResult(request.messages[0].text.splitlines()[0], summarizer="first-line")
    """

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request.messages`` (folding in ``request.previous_summary``)."""
        ...


def default_counter() -> TokenCounter:
    """The text counter summaries are budgeted with: the exact gpt-4o tokenizer when available, else an estimate."""
    # Looked up by name so that the summarizer works against whichever tokens module is installed: the exact
    # counter when ``counter_for_model`` exists, the character estimate otherwise.
    tokens = import_module("contextfold.tokens")
    factory = getattr(tokens, "counter_for_model", None)
    if factory is not None:
        try:
            inner = getattr(factory(_BUDGET_MODEL), "counter", None)
        except Exception:  # an unknown model or a missing BPE file must not stop summarizing
            inner = None
        if isinstance(inner, TokenCounter):
            return inner
    return EstimatingCounter()


def validate_request(request: SummaryRequest) -> None:
    """Reject a request that cannot be summarized, naming the field and the problem."""
    from ..errors import ConfigError, InvalidHistory

    if request.max_tokens <= 0:
        raise ConfigError(f"must be a positive number of tokens, got {request.max_tokens}", field="max_tokens")
    if request.strategy not in STRATEGIES:
        raise ConfigError(f"unknown strategy {request.strategy!r}; choose one of {', '.join(STRATEGIES)}",
                          field="strategy")
    if request.strategy == "custom" and not (request.custom_prompt or "").strip():
        raise ConfigError("strategy 'custom' needs a non-empty custom_prompt", field="custom_prompt")
    messages = request.messages
    # (The types are collected in C first: a summary's input can be most of a 100,000-message view, issue 22.)
    if type(messages) not in (tuple, list) or not set(map(type, messages)) <= {Message}:
        for index, message in enumerate(messages):
            if not isinstance(message, Message):
                raise InvalidHistory(f"expected a Message, got {type(message).__name__}", index=index)
    if isinstance(request.verbatim, str) or not all(isinstance(text, str) for text in request.verbatim):
        raise ConfigError("must be a sequence of message texts (str)", field="verbatim")
