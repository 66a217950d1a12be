"""LLMSummarizer against ScriptedLLMServer on loopback, through the real openai and anthropic SDKs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from contextfold.errors import SummarizerError
from contextfold.messages import Message, ToolCall
from contextfold.providers import get_provider
from contextfold.summarize.base import SummaryRequest
from contextfold.summarize.extractive import ExtractiveSummarizer
from contextfold.summarize.llm import DEFAULT_SEED, MASKED_TOOL_OUTPUT_TOKENS, LLMSummarizer
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import ErrorReply, Reply
from contextfold.tokens import EstimatingCounter

COUNTER = EstimatingCounter()
HISTORY = (
    Message.user("Fix the failing test tests/test_dates.py::test_leap_year. Never touch setup.py."),
    Message.assistant("Looking at the code.", [ToolCall("call_1", "read_file", '{"path": "src/dates.py"}')]),
    Message.tool("call_1", "def is_leap(y):\n    return y % 4 == 0\n", name="read_file"),
    Message.assistant("The bug is in is_leap because it ignores centuries; I will fix src/dates.py."),
)
GOOD = "<summary>## Goal\nFix test_leap_year in src/dates.py</summary>\n<retain>\n- Never touch setup.py\n</retain>"


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(counter=COUNTER) as s:
        yield s


def openai_summarizer(server: ScriptedLLMServer, **kw: object) -> LLMSummarizer:
    provider = get_provider("openai:gpt-4o-mini", base_url=server.base_url, api_key="test", max_retries=0)
    return LLMSummarizer(provider, counter=COUNTER, **kw)  # type: ignore[arg-type]


def anthropic_summarizer(server: ScriptedLLMServer) -> LLMSummarizer:
    provider = get_provider("anthropic:claude-haiku-4-5", base_url=server.url, api_key="test", max_retries=0)
    return LLMSummarizer(provider, counter=COUNTER)


def request(**kw: object) -> SummaryRequest:
    return SummaryRequest(HISTORY, **kw)  # type: ignore[arg-type]


# -- OpenAI-compatible -------------------------------------------------------------------------------------------


def test_normal_summary(server: ScriptedLLMServer) -> None:
    server.push(GOOD)
    result = openai_summarizer(server).summarize(request(max_tokens=500, summary_directives=("list test names",)))
    assert result.summary == "## Goal\nFix test_leap_year in src/dates.py"
    assert result.retain == ("Never touch setup.py",)
    assert not result.fell_back and result.warnings == ()
    assert result.summarizer == "llm:openai:gpt-4o-mini"
    sent = server.requests[0]
    assert result.input_tokens == sent.input_tokens and result.output_tokens
    assert sent.body["temperature"] == 0 and sent.body["seed"] == DEFAULT_SEED and sent.max_tokens == 500
    # The summarizer's own request is one system and one user message: the history travels as a transcript,
    # so no tool-call pairing can be broken and nothing of this call enters the agent's history.
    roles = [m["role"] for m in sent.body["messages"]]
    assert roles == ["system", "user"]
    prompt = sent.body["messages"][1]["content"]
    assert "tests/test_dates.py::test_leap_year" in prompt and "- list test names" in prompt
    assert '-> call read_file({"path": "src/dates.py"})' in prompt


def test_over_long_summary_is_retried_at_half_the_tokens(server: ScriptedLLMServer) -> None:
    server.push("<summary>" + "lots of words " * 200 + "</summary>", GOOD)
    result = openai_summarizer(server).summarize(request(max_tokens=120))
    assert [r.max_tokens for r in server.requests] == [120, 60]
    assert server.requests[0].response["choices"][0]["finish_reason"] == "length"
    assert "60 tokens" in server.requests[1].body["messages"][1]["content"]
    assert result.summary.startswith("## Goal") and not result.fell_back
    assert any("over budget" in w for w in result.warnings)


def test_summary_over_budget_after_two_retries_falls_back(server: ScriptedLLMServer) -> None:
    long = "<summary>" + "more words " * 300 + "</summary>"
    server.push(long, long, long)
    result = openai_summarizer(server).summarize(request(max_tokens=100))
    assert [r.max_tokens for r in server.requests] == [100, 50, 25]
    assert result.fell_back and result.summarizer == "extractive"
    assert "after 2 retries" in result.warnings[-1]
    assert COUNTER.count(result.summary) + sum(COUNTER.count(f) + 1 for f in result.retain) <= 100


def test_error_falls_back_to_extractive_with_a_warning(server: ScriptedLLMServer) -> None:
    server.push(ErrorReply.server_error())
    result = openai_summarizer(server).summarize(request(max_tokens=400))
    expected = ExtractiveSummarizer(counter=COUNTER).summarize(request(max_tokens=400))
    assert result.fell_back
    assert (result.summary, result.retain) == (expected.summary, expected.retain)
    assert "InternalServerError" in result.warnings[-1] and "extractive" in result.warnings[-1]


def test_refusal_falls_back(server: ScriptedLLMServer) -> None:
    server.push(Reply.refused("I can't summarize this."))
    result = openai_summarizer(server).summarize(request())
    assert result.fell_back
    assert "refused: I can't summarize this." in result.warnings[-1]
    assert "src/dates.py" in result.summary


def test_empty_reply_falls_back(server: ScriptedLLMServer) -> None:
    server.push("<summary>  </summary>")
    result = openai_summarizer(server).summarize(request())
    assert result.fell_back and "empty summary" in result.warnings[-1]


def test_without_fallback_failure_raises(server: ScriptedLLMServer) -> None:
    server.push(ErrorReply.rate_limit())
    with pytest.raises(SummarizerError, match="RateLimitError"):
        openai_summarizer(server, fallback=None).summarize(request())


def test_context_overflow_of_the_summarizer_model_falls_back() -> None:
    with ScriptedLLMServer(["unused"], context_window=30, counter=COUNTER) as server:
        result = openai_summarizer(server).summarize(request())
    assert result.fell_back and "ContextOverflowError" in result.warnings[-1]


def test_reply_without_tags_is_the_whole_summary(server: ScriptedLLMServer) -> None:
    server.push("Goal: fix is_leap in src/dates.py.")
    result = openai_summarizer(server).summarize(request())
    assert (result.summary, result.retain) == ("Goal: fix is_leap in src/dates.py.", ())


def test_responses_api_summary(server: ScriptedLLMServer) -> None:
    server.push(GOOD)
    provider = get_provider("openai-responses:gpt-4o-mini", base_url=server.base_url, api_key="t", max_retries=0)
    result = LLMSummarizer(provider, counter=COUNTER).summarize(request())
    assert result.retain == ("Never touch setup.py",) and not result.fell_back
    assert server.requests[0].api == "responses"


# -- keeping the summarizer's input inside its window ------------------------------------------------------------


def long_history(turns: int, output_chars: int) -> tuple[Message, ...]:
    messages = [Message.user("Refactor the billing module; keep the public API of billing/api.py.")]
    for i in range(turns):
        messages.append(Message.assistant(f"Step {i}: run tests.",
                                          [ToolCall(f"call_{i}", "bash", f'{{"command": "pytest -k case_{i}"}}')]))
        messages.append(Message.tool(f"call_{i}", f"case_{i} output " + "x" * output_chars, name="bash"))
    return tuple(messages)


def test_tool_outputs_are_masked_first_when_the_input_is_too_big(server: ScriptedLLMServer) -> None:
    server.push(GOOD)
    summarizer = openai_summarizer(server, max_input_tokens=6_000)
    result = summarizer.summarize(SummaryRequest(long_history(6, 8_000), max_tokens=300))
    assert len(server.requests) == 1
    prompt = server.requests[0].body["messages"][1]["content"]
    assert "tokens omitted" in prompt and "pytest -k case_5" in prompt
    assert COUNTER.count(prompt) < 6_000
    assert any(f"masked to {MASKED_TOOL_OUTPUT_TOKENS}" in w for w in result.warnings)


def test_history_beyond_the_window_is_chunked_and_folded(server: ScriptedLLMServer) -> None:
    server.handler = lambda req: f"<summary>summary after request {req.number}</summary><retain>fact {req.number}" \
                                 "</retain>"
    summarizer = openai_summarizer(server, max_input_tokens=3_000)
    result = summarizer.summarize(SummaryRequest(long_history(40, 100), max_tokens=200, previous_summary="S0"))
    n = len(server.requests)
    assert n >= 2
    for req in server.requests:
        assert req.input_tokens <= 3_000
    prompts = [r.body["messages"][1]["content"] for r in server.requests]
    assert "<previous_summary>\nS0\n</previous_summary>" in prompts[0]
    for i in range(1, n):
        assert f"summary after request {i}" in prompts[i]  # each chunk folds in the summary so far
    assert result.summary == f"summary after request {n}"
    assert result.retain == tuple(f"fact {i}" for i in range(1, n + 1))
    assert any("chunks" in w for w in result.warnings)


def test_window_too_small_for_the_prompt_falls_back(server: ScriptedLLMServer) -> None:
    result = openai_summarizer(server, max_input_tokens=100).summarize(request(max_tokens=200))
    assert result.fell_back and "no room" in result.warnings[-1]
    assert server.requests == []


# -- Anthropic ---------------------------------------------------------------------------------------------------


def test_anthropic_normal_summary(server: ScriptedLLMServer) -> None:
    server.push(GOOD)
    result = anthropic_summarizer(server).summarize(request(max_tokens=300))
    assert result.retain == ("Never touch setup.py",) and not result.fell_back
    sent = server.requests[0]
    assert sent.api == "messages" and sent.max_tokens == 300
    assert sent.body["system"].startswith("You compress the working history")


def test_anthropic_error_falls_back(server: ScriptedLLMServer) -> None:
    server.push(ErrorReply("overloaded"))
    result = anthropic_summarizer(server).summarize(request())
    assert result.fell_back
    assert "overloaded" in result.warnings[-1].lower()


def test_anthropic_refusal_falls_back(server: ScriptedLLMServer) -> None:
    server.push(Reply.refused())
    assert anthropic_summarizer(server).summarize(request()).fell_back


# -- async -------------------------------------------------------------------------------------------------------


def test_asummarize_matches_summarize(server: ScriptedLLMServer) -> None:
    server.push(GOOD, "<summary>" + "w " * 400 + "</summary>", GOOD)
    summarizer = openai_summarizer(server)
    sync = summarizer.summarize(request(max_tokens=150))
    async_result = asyncio.run(summarizer.asummarize(request(max_tokens=150)))
    assert (async_result.summary, async_result.retain) == (sync.summary, sync.retain)
    assert [r.max_tokens for r in server.requests] == [150, 150, 75]


def test_spec_string_builds_the_provider() -> None:
    summarizer = LLMSummarizer("anthropic", "claude-haiku-4-5")
    assert summarizer.name == "llm:anthropic:claude-haiku-4-5" and summarizer.model == "claude-haiku-4-5"
