"""The LLM summarizer: a chat model writes the summary; the extractive summarizer answers when it cannot.

The request sent to the model and its reply never enter the agent's history: they exist only inside
:meth:`LLMSummarizer.summarize`. The summarizer's own input is kept inside its model's window: tool outputs are
masked first, then the history is cut into chunks that are summarized in turn, each folding in the summary so far.

The call sequence is written once as a generator (it yields the calls it wants and receives the replies), so that
the sync and async entry points share every decision and differ only in how they wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..errors import SummarizerError
from ..messages import ImagePart, Message, TextPart, ThinkingPart
from ..tokens import TokenCounter
from .base import Summarizer, SummaryRequest, SummaryResult, default_counter, validate_request
from .extractive import ExtractiveSummarizer
from .parse import parse_reply
from .prompts import build_prompt

if TYPE_CHECKING:
    # Types only: the core never imports an edge at run time (a provider spec string is resolved lazily).
    from .provider import ChatProvider, Completion

__all__ = ["LLMSummarizer", "render_message", "render_transcript"]

# Same input, same summary: temperature 0 and a fixed seed (providers that support seeds honour it).
DEFAULT_SEED = 1234
# A summary over budget is asked again at half the size, at most this many times (then the fallback answers).
MAX_OVER_BUDGET_RETRIES = 2
# When the summarizer model's window is unknown: 32K fits the local models commonly served behind
# OpenAI-compatible endpoints (vLLM, Ollama, llama.cpp), and any hosted model has more.
DEFAULT_MAX_INPUT_TOKENS = 32_000
# A masked tool output keeps this many tokens of its head and tail: enough for the command's outcome line.
MASKED_TOOL_OUTPUT_TOKENS = 200
# Rendering adds role labels and call lines the counter does not see per message; keep this much slack.
INPUT_SAFETY_MARGIN = 0.1

_FALLBACK_DEFAULT: Any = object()


@dataclass(frozen=True, slots=True)
class _Call:
    system: str
    user: str
    max_tokens: int


class _Failure(Exception):
    """A reply the summarizer cannot use (refusal, empty, over budget after retries)."""


# -- rendering history for the summarizer --------------------------------------------------------------------------


def _content_text(message: Message) -> str:
    pieces: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ImagePart):
            pieces.append("[image]")
        elif isinstance(part, ThinkingPart):
            continue  # reasoning is the model's scratchpad; the summary keeps conclusions, not deliberation
        else:
            pieces.append(f"[{part.type}]")
    return "\n".join(pieces)


def render_message(index: int, message: Message, *, tool_output: str | None = None) -> str:
    """One message as a transcript entry; ``tool_output`` replaces a tool result's text (when masked)."""
    label: str = message.role
    if message.role == "tool":
        label = f"tool result ({message.name or 'tool'}, {message.tool_call_id})"
    elif message.kind == "summary":
        label = "earlier summary"
    text = tool_output if tool_output is not None else _content_text(message)
    lines = [f"[{index}] {label}: {text}".rstrip()]
    lines.extend(f"    -> call {call.name}({call.arguments}) id={call.id}" for call in message.tool_calls)
    return "\n".join(lines)


def render_transcript(messages: Sequence[Message]) -> str:
    """The messages as the plain-text transcript a summarizer model reads (no tool-call pairing to break)."""
    return "\n\n".join(render_message(i, m) for i, m in enumerate(messages))


def _shorten(text: str, counter: TokenCounter, budget: int) -> str:
    """Head and tail of ``text`` within about ``budget`` tokens, with a marker saying how much was left out."""
    total = counter.count(text)
    if total <= budget:
        return text
    keep = max(int(len(text) * budget / total), 0)
    head, tail = text[: keep // 2], text[len(text) - keep // 2 :]
    return f"{head}\n[… {total - budget} tokens omitted …]\n{tail}"


# -- the summarizer -----------------------------------------------------------------------------------------------


class LLMSummarizer:
    """Summarizes with a chat model; falls back to the extractive summarizer on error, refusal or empty reply.

    Args:
        provider: a :class:`~contextfold.providers.ChatProvider`, or a spec such as ``"openai:gpt-4o-mini"``.
        model: the summarizer model's name, used to look up its window (and to complete a spec without one).
        fallback: answers when the model fails; ``None`` raises :class:`~contextfold.errors.SummarizerError`.
        max_input_tokens: the most the summarizer's input may take; default from the model's window.
        counter: the tokenizer budgets are checked with.
        seed: sent to providers that take one (with temperature 0) for repeatable summaries.

    Example:
        >>> summarizer = LLMSummarizer("openai:gpt-4o-mini")  # doctest: +SKIP
    """

    def __init__(
        self,
        provider: ChatProvider | str,
        model: str | None = None,
        *,
        fallback: Summarizer | None = _FALLBACK_DEFAULT,
        max_input_tokens: int | None = None,
        counter: TokenCounter | None = None,
        seed: int = DEFAULT_SEED,
    ) -> None:
        if isinstance(provider, str):
            # Resolved here, on demand, so that the core imports no edge unless a spec string asks for one.
            spec = provider if ":" in provider or model is None else f"{provider}:{model}"
            model = model or spec.partition(":")[2] or None
            resolved: ChatProvider = import_module("contextfold.providers").get_provider(spec)
        else:
            resolved = provider
        self.provider = resolved
        self.model = model or getattr(resolved, "model", None)
        self.fallback: Summarizer | None = ExtractiveSummarizer() if fallback is _FALLBACK_DEFAULT else fallback
        self.max_input_tokens = max_input_tokens
        self.seed = seed
        self._counter = counter
        self.name = f"llm:{getattr(resolved, 'name', type(resolved).__name__)}"

    @property
    def counter(self) -> TokenCounter:
        """The tokenizer budgets are checked with (resolved on first use)."""
        if self._counter is None:
            self._counter = default_counter()
        return self._counter

    def input_budget(self, max_tokens: int) -> int:
        """Tokens the summarizer's input may take: the given limit, or the model's window less the reply."""
        if self.max_input_tokens is not None:
            return self.max_input_tokens
        window = _window_of(self.model)
        return DEFAULT_MAX_INPUT_TOKENS if window is None else max(window - max_tokens, 0)

    # -- entry points ------------------------------------------------------------------------------------------
    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize with the model; on failure, with the fallback (``fell_back=True`` and a warning)."""
        validate_request(request)
        steps = self._steps(request)
        try:
            call = next(steps)
            while True:
                reply = self.provider.complete(call.system, [{"role": "user", "content": call.user}],
                                               max_tokens=call.max_tokens, temperature=0.0, seed=self.seed)
                call = steps.send(reply)
        except StopIteration as done:
            result: SummaryResult = done.value
            return result
        except Exception as exc:  # any failure of the model path is answered by the fallback, by design
            return self._fall_back(request, exc)

    async def asummarize(self, request: SummaryRequest) -> SummaryResult:
        """Async :meth:`summarize`: awaits the provider's ``acomplete`` (or runs ``complete`` in a thread)."""
        validate_request(request)
        steps = self._steps(request)
        acomplete = getattr(self.provider, "acomplete", None)
        try:
            call = next(steps)
            while True:
                kwargs: dict[str, Any] = {"max_tokens": call.max_tokens, "temperature": 0.0, "seed": self.seed}
                messages = [{"role": "user", "content": call.user}]
                if acomplete is not None:
                    reply = await acomplete(call.system, messages, **kwargs)
                else:
                    reply = await asyncio.to_thread(partial(self.provider.complete, **kwargs), call.system, messages)
                call = steps.send(reply)
        except StopIteration as done:
            result: SummaryResult = done.value
            return result
        except Exception as exc:  # as in summarize: the fallback answers every failure
            return self._fall_back(request, exc)

    # -- the call sequence -------------------------------------------------------------------------------------
    def _steps(self, request: SummaryRequest) -> Generator[_Call, Completion, SummaryResult]:
        chunks, warnings = self._chunks(request)
        summary = request.previous_summary
        retain: list[str] = []
        input_tokens = output_tokens = 0
        for chunk in chunks:
            part = replace(request, previous_summary=summary)
            max_tokens = request.max_tokens
            for attempt in range(MAX_OVER_BUDGET_RETRIES + 1):
                system, user = build_prompt(part, chunk, max_tokens=max_tokens)
                reply = yield _Call(system, user, max_tokens)
                input_tokens += reply.input_tokens or 0
                output_tokens += reply.output_tokens or 0
                if reply.refusal or reply.finish_reason == "refusal":
                    raise _Failure(f"the model refused: {reply.refusal or reply.text}".strip())
                parsed = parse_reply(reply.text)
                if not parsed.summary:
                    raise _Failure("the model returned an empty summary")
                size = self.counter.count(parsed.summary) + sum(self.counter.count(f) + 1 for f in parsed.retain)
                if reply.finish_reason != "length" and size <= request.max_tokens:
                    break
                if attempt == MAX_OVER_BUDGET_RETRIES:
                    raise _Failure(f"summary still over its budget of {request.max_tokens} tokens after "
                                   f"{MAX_OVER_BUDGET_RETRIES} retries at half the size")
                warnings.append(f"summary over budget ({size} tokens > {request.max_tokens}, "
                                f"finish_reason={reply.finish_reason}); retrying with max_tokens={max_tokens // 2}")
                max_tokens //= 2
            summary = parsed.summary
            retain.extend(f for f in parsed.retain if f not in retain)
        return SummaryResult(summary=summary or "", retain=tuple(retain), summarizer=self.name,
                             input_tokens=input_tokens or None, output_tokens=output_tokens or None,
                             warnings=tuple(warnings))

    def _chunks(self, request: SummaryRequest) -> tuple[list[str], list[str]]:
        """The transcript, masked and cut so that each call fits the summarizer's window."""
        counter = self.counter
        overhead = sum(counter.count(t) for t in build_prompt(request, "", max_tokens=request.max_tokens))
        # Later chunks also carry the rolling summary (up to max_tokens) in their prompt.
        room = int((self.input_budget(request.max_tokens) - overhead - request.max_tokens)
                   * (1 - INPUT_SAFETY_MARGIN))
        if room <= 0:
            raise SummarizerError(f"the summarizer's window leaves no room for history (budget "
                                  f"{self.input_budget(request.max_tokens)} tokens, prompt {overhead} tokens)")
        warnings: list[str] = []
        entries = [render_message(i, m) for i, m in enumerate(request.messages)]
        if sum(counter.count(e) for e in entries) > room:
            entries = [
                render_message(i, m, tool_output=_shorten(_content_text(m), counter, MASKED_TOOL_OUTPUT_TOKENS))
                if m.role == "tool" else entries[i]
                for i, m in enumerate(request.messages)
            ]
            warnings.append(f"summarizer input over {room} tokens: tool outputs masked to "
                            f"{MASKED_TOOL_OUTPUT_TOKENS} tokens each")
        chunks: list[str] = []
        current: list[str] = []
        used = 0
        for entry in entries:
            cost = counter.count(entry) + 2
            if cost > room:
                entry, cost = _shorten(entry, counter, room - 2), room
            if current and used + cost > room:
                chunks.append("\n\n".join(current))
                current, used = [], 0
            current.append(entry)
            used += cost
        chunks.append("\n\n".join(current))
        if len(chunks) > 1:
            warnings.append(f"summarizer input split into {len(chunks)} chunks summarized in turn")
        return chunks, warnings

    def _fall_back(self, request: SummaryRequest, exc: Exception) -> SummaryResult:
        reason = str(exc) if isinstance(exc, _Failure) else f"{type(exc).__name__}: {exc}"
        warning = f"LLM summarizer {self.name} failed ({reason})"
        if self.fallback is None:
            raise SummarizerError(warning) from exc
        result = self.fallback.summarize(request)
        fallback_name = result.summarizer or type(self.fallback).__name__
        return replace(result, fell_back=True,
                       warnings=(*result.warnings, f"{warning}; used the {fallback_name} summarizer instead"))


def _window_of(model: str | None) -> int | None:
    """The model's context window from the registry, when there is a registry and it knows the model."""
    if not model:
        return None
    try:
        models = import_module("contextfold.tokens.models")
        info = models.get_model(model)
    except Exception:  # no registry yet, or an unknown model: the default budget applies
        return None
    window = getattr(info, "context_window", None)
    return window if isinstance(window, int) else None
