"""A pydantic-ai ``Agent`` runs its own loop against the scripted server, kept in the window by contextfold."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pydantic_ai")

from _fw_support import (
    DEGRADE_TURNS,
    FINAL_ANSWER,
    TURNS,
    WINDOW,
    assert_degraded,
    assert_scenario_held,
    big_output,
    degrading_manager,
    expected_requests,
    log_page,
    make_manager,
    retrieval_handler,
    run_script,
    scripted_replies,
    shape,
    target_row,
)
from pydantic_ai import Agent, UsageLimits
from pydantic_ai import messages as pm
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from contextfold.errors import InvalidHistory
from contextfold.integrations.pydantic_ai import ContextfoldHistoryProcessor, Origins, from_pydantic_ai, to_pydantic_ai
from contextfold.manager import ContextManager
from contextfold.telemetry import RecordingTelemetry
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

PROMPT = "Read the build log page by page, then say what failed."
# Fifty tool turns and the answer, with room to spare (pydantic-ai's default caps requests at 50).
REQUEST_LIMIT = TURNS + 5


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=WINDOW, validator="formats") as s:
        yield s


def make_agent(server: ScriptedLLMServer, processor: ContextfoldHistoryProcessor | None) -> Agent[None, str]:
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=server.base_url, api_key="test"))
    capabilities = [processor.capability()] if processor is not None else []
    agent: Agent[None, str] = Agent(model, system_prompt=PROMPT, capabilities=capabilities)

    @agent.tool_plain
    def read_log(page: int) -> str:
        """Read one page of the build log."""
        return log_page(page)

    return agent


def test_fifty_tool_turns_finish_inside_the_window(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    cm = make_manager("pai-50")
    processor = ContextfoldHistoryProcessor(cm)
    result = make_agent(server, processor).run_sync("Why does the build fail?",
                                                       usage_limits=UsageLimits(request_limit=REQUEST_LIMIT))
    assert result.output == FINAL_ANSWER
    assert_scenario_held(server, cm)
    assert processor.rebuilds == 0 and processor.rewrites >= 1
    # The processed history is the run's history: compacted, far smaller than fifty pages.
    history = result.all_messages()
    returns = [p for m in history if isinstance(m, pm.ModelRequest) for p in m.parts
               if isinstance(p, pm.ToolReturnPart)]
    # masked (a ref kept, the page readable by it) or compacted away: far fewer than fifty pages remain
    pages = [x for x in returns if "tool output trimmed" not in str(x.content)]
    assert len(pages) < TURNS // 2
    # The system prompt survives compaction and leads every request.
    assert all(r.items[0] == {"role": "system", "content": PROMPT} for r in server.requests)
    assert cm.usage_total.input > 0
    # The final reply is the manager's too (issue 21 §6: status() and the archive missed the answer).
    assert cm.messages()[-1].role == "assistant" and cm.messages()[-1].text == FINAL_ANSWER


def test_without_the_processor_the_same_run_overflows(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    with pytest.raises(Exception, match="maximum context length"):
        make_agent(server, None).run_sync("Why does the build fail?",
                                        usage_limits=UsageLimits(request_limit=REQUEST_LIMIT))
    assert server.requests[-1].status == 400


def test_unchanged_history_comes_back_as_the_same_objects() -> None:
    history: list[pm.ModelMessage] = [
        pm.ModelRequest(parts=[pm.SystemPromptPart("sys"), pm.UserPromptPart("hi")], instructions="be brief"),
        pm.ModelResponse(parts=[pm.TextPart("let me look"), pm.ToolCallPart("read_log", {"page": 1}, "c1")]),
        pm.ModelRequest(parts=[pm.ToolReturnPart("read_log", "page one", "c1")]),
    ]
    processor = ContextfoldHistoryProcessor(make_manager("pai-identity"))
    out = processor.process(list(history))
    assert all(a is b for a, b in zip(out, history, strict=True)) and len(out) == len(history)
    assert processor.rewrites == 0
    # A continuation is added incrementally; the earlier objects are still answered as themselves.
    more = [*out, pm.ModelResponse(parts=[pm.TextPart("done")]), pm.ModelRequest(parts=[pm.UserPromptPart("ok")])]
    again = processor.process(more)
    assert all(a is b for a, b in zip(again, more, strict=True)) and processor.rebuilds == 0


def test_a_huge_tool_return_is_truncated_and_the_request_rebuilt() -> None:
    huge = log_page(3) * 60
    history: list[pm.ModelMessage] = [
        pm.ModelRequest(parts=[pm.UserPromptPart("read page 3")], instructions="be brief"),
        pm.ModelResponse(parts=[pm.ToolCallPart("read_log", {"page": 3}, "c3")]),
        pm.ModelRequest(parts=[pm.ToolReturnPart("read_log", huge, "c3")], instructions="be brief"),
    ]
    # A roomy window: only write-time truncation acts, no compaction.
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="pai-huge")
    out = ContextfoldHistoryProcessor(cm).process(list(history))
    last = out[-1]
    assert isinstance(last, pm.ModelRequest) and last.instructions == "be brief"
    (part,) = last.parts
    assert isinstance(part, pm.ToolReturnPart) and part.tool_call_id == "c3"
    assert len(part.content) < len(huge) and "tout_" in part.content
    assert history[-1].parts[0].content == huge  # the input was not changed


def test_bad_input_names_the_index() -> None:
    with pytest.raises(InvalidHistory, match="message 1"):
        from_pydantic_ai([pm.ModelRequest(parts=[pm.UserPromptPart("hi")]), "not a message"])  # type: ignore[list-item]


@settings(max_examples=50, deadline=None)
@given(spec=st.lists(st.tuples(st.text(max_size=20), st.integers(0, 3)), min_size=1, max_size=8),
       change=st.integers(min_value=0))
def test_conversion_properties(spec: list[tuple[str, int]], change: int) -> None:
    history: list[pm.ModelMessage] = [pm.ModelRequest(parts=[pm.SystemPromptPart("sys"), pm.UserPromptPart("go")],
                                                      instructions="brief")]
    for t, (text, calls) in enumerate(spec):
        ids = [f"c{t}_{k}" for k in range(calls)]
        history.append(pm.ModelResponse(parts=[pm.TextPart(text or "..."),
                                               *(pm.ToolCallPart("f", {"k": k}, i) for k, i in enumerate(ids))]))
        returns = [pm.ToolReturnPart("f", f"{text} result", i) for i in ids]
        history.append(pm.ModelRequest(parts=returns or [pm.UserPromptPart(f"next {t}")], instructions="brief"))
    origins = Origins()
    converted = from_pydantic_ai(history, origins)
    assert all(a is b for a, b in zip(to_pydantic_ai(converted, origins), history, strict=True))
    # Changing one Message rebuilds only the pydantic-ai message that holds it; the rest stay the same objects.
    i = change % len(converted)
    changed = [*converted[:i], converted[i].with_content("[changed]"), *converted[i + 1:]]
    back = to_pydantic_ai(changed, origins)
    assert len(back) == len(history)
    differing = [k for k, (a, b) in enumerate(zip(back, history, strict=True)) if a is not b]
    assert len(differing) == 1
    k = differing[0]
    assert "[changed]" in repr(back[k]) and type(back[k]) is type(history[k])
    if isinstance(back[k], pm.ModelRequest):
        assert back[k].instructions == "brief"


def roomy_manager(session_id: str, **options: object) -> ContextManager:
    return ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=session_id,
                          **options)  # type: ignore[arg-type]


def test_three_runs_with_a_new_processor_each_time(server: ScriptedLLMServer) -> None:
    cm = roomy_manager("pai-reuse")
    history: list[pm.ModelMessage] = []
    for run in range(3):
        server.push(*run_script(run))
        agent = make_agent(server, ContextfoldHistoryProcessor(cm))  # built inline, per run
        result = agent.run_sync(f"question {run}", message_history=history)
        assert result.output == f"answer {run}"
        history = result.all_messages()
    assert [shape(r) for r in server.requests] == expected_requests(3, [f"system {PROMPT[:40]}"])
    assert not server.invalid_requests and cm.framework_history.rebuilds == 0
    # pydantic-ai keeps the processed history: each message once (system+question, call, output, answer per run).
    assert len(history) == 1 + 4 * 3 - 1
    # Every run's answer reached the manager once, the last one included.
    assert [m.text for m in cm.messages() if m.role == "assistant" and m.text.startswith("answer ")] == \
        ["answer 0", "answer 1", "answer 2"]


def test_retrieval_round_trip() -> None:
    with ScriptedLLMServer(validator="formats") as server:
        server.push(Reply.calling(ScriptedToolCall("read_big", {}, id="call_big")))
        server.handler = retrieval_handler
        processor = ContextfoldHistoryProcessor(roomy_manager("pai-retrieval"))
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=server.base_url, api_key="test"))
        agent: Agent[None, str] = Agent(model, system_prompt="Answer from the report.",
                                        capabilities=[processor.capability()])

        @agent.tool_plain
        def read_big() -> str:
            """Read the whole report."""
            return big_output()

        result = agent.run_sync("What is the checksum of row 1234?")
        assert result.output == f"found: {target_row()}"
        assert len(server.requests) == 3 and not server.invalid_requests
        tools = [t["function"]["name"] for t in server.requests[0].body["tools"]]
        assert {"tool_output_cache", "tool_output_cache_grep", "history_search"} <= set(tools)
        cut = server.requests[1].items[-1]
        assert 'tool_output_cache(ref_id="tout_' in cut["content"] and len(cut["content"]) * 1.5 < 100_000
        assert server.requests[2].items[-1]["tool_call_id"] == "call_read"
        assert target_row() in server.requests[2].items[-1]["content"]


def test_overflow_is_recovered_within_the_run() -> None:
    with ScriptedLLMServer(context_window=2_500, validator="formats") as small:
        telemetry = RecordingTelemetry()
        cm = ContextManager(model="gpt-4o", max_context_tokens=20_000, store="memory", archive="memory",
                            session_id="pai-overflow", telemetry=telemetry)
        small.push(*(Reply.calling(ScriptedToolCall("read_log", {"page": p}, id=f"call_{p}")) for p in range(4)),
                   "done")
        result = make_agent(small, ContextfoldHistoryProcessor(cm)).run_sync("read four pages")
        assert result.output == "done"
        statuses = [r.status for r in small.requests]
        assert 400 in statuses and statuses[-1] == 200 and not small.invalid_requests
        names = [e.NAME for e in telemetry.events]
        assert "recovery.retry" in names and "recovery.gave_up" not in names


@pytest.mark.parametrize("window", [2_500, 300])
def test_a_steps_recovery_is_not_kept_after_the_step(window: int) -> None:
    """Red team: a recovered step's OverflowRecovery (and a given-up one's) stayed in the capability for good.

    The run works on its own copy (``for_run``): the capability the agent keeps holds none after it.
    """
    with ScriptedLLMServer(context_window=window, validator="formats") as small:
        cm = ContextManager(model="gpt-4o", max_context_tokens=20_000, store="memory", archive="memory",
                            session_id=f"pai-recoveries-{window}")
        small.push(*(Reply.calling(ScriptedToolCall("read_log", {"page": p}, id=f"call_{p}")) for p in range(4)),
                   "done")
        capability = ContextfoldHistoryProcessor(cm).capability()
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=small.base_url, api_key="test"))
        agent: Agent[None, str] = Agent(model, system_prompt=PROMPT, capabilities=[capability])

        @agent.tool_plain
        def read_log(page: int) -> str:
            """Read one page of the build log."""
            return log_page(page)

        if window > 1_000:
            assert agent.run_sync("read four pages").output == "done"
        else:
            with pytest.raises(Exception, match=r"still too long|stall guard|RecoveryFailed|too long"):
                agent.run_sync("read four pages")
        assert 400 in [r.status for r in small.requests]
        assert capability._recoveries == {}


def test_a_cut_note_names_no_tool_without_the_tools(server: ScriptedLLMServer) -> None:
    server.push(Reply.calling(ScriptedToolCall("read_big", {}, id="call_big")), "done")
    processor = ContextfoldHistoryProcessor(roomy_manager("pai-no-tools"), retrieval_tools=False)
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=server.base_url, api_key="test"))
    agent: Agent[None, str] = Agent(model, capabilities=[processor.capability()])

    @agent.tool_plain
    def read_big() -> str:
        """Read the whole report."""
        return big_output()

    agent.run_sync("read it")
    note = server.requests[1].items[-1]["content"]
    assert "tool_output_cache" not in note and "bytes in full" in note


def test_a_failing_compaction_degrades_instead_of_ending_the_run(server: ScriptedLLMServer) -> None:
    telemetry = RecordingTelemetry()
    server.push(*scripted_replies(DEGRADE_TURNS))
    processor = ContextfoldHistoryProcessor(degrading_manager("pai-degrade", telemetry))
    result = make_agent(server, processor).run_sync("Why does the build fail?")
    assert result.output == FINAL_ANSWER and not server.invalid_requests
    assert_degraded(telemetry.events)
    server.push(*scripted_replies(DEGRADE_TURNS))
    strict = ContextfoldHistoryProcessor(degrading_manager("pai-strict", RecordingTelemetry()), strict=True)
    with pytest.raises(Exception, match=r"summary model is down|circuit|budget"):
        make_agent(server, strict).run_sync("Why does the build fail?")


def test_a_new_manager_over_a_persisted_history_counts_it_by_its_own_view(server: ScriptedLLMServer) -> None:
    # issue 21 §3: the history's first reply carries the usage of a request a previous manager sent; fed to a new
    # manager before it prepared anything, it was taken as the size of the new view (5,608 tokens believed for a
    # first request of 4,220 before the fix).
    history: list[pm.ModelMessage] = []
    for run in range(2):
        server.push(*run_script(run))
        question = f"question {run}" + (": " + "the build of module alpha fails at link time " * 150 if not run else "")
        history = make_agent(server, ContextfoldHistoryProcessor(roomy_manager("pai-old"))).run_sync(
            question, message_history=history).all_messages()
    tel = RecordingTelemetry()
    cm = roomy_manager("pai-new", telemetry=tel)
    server.push(*run_script(2))
    sent = len(server.requests)
    make_agent(server, ContextfoldHistoryProcessor(cm)).run_sync("question 2", message_history=history)
    first = next(e for e in tel.events if getattr(e, "event", None) == "prepare")
    # Our count of the first request this manager sent (the provider counts the tool schema and framing too).
    assert first.attributes["tokens"] <= server.requests[sent].input_tokens
