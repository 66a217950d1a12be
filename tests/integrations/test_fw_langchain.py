"""LangChain v1 ``create_agent`` runs its own loop against the scripted server, kept in the window by contextfold."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain")
pytest.importorskip("langchain_openai")

from _fw_support import FINAL_ANSWER, TURNS, WINDOW, assert_scenario_held, log_page, make_manager, scripted_replies
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from contextfold.errors import ConfigError, InvalidHistory
from contextfold.integrations._langchain_convert import Origins, from_langchain, to_langchain
from contextfold.integrations.langchain import ContextfoldMiddleware
from contextfold.testing import ScriptedLLMServer

# Each tool turn passes through the middleware, model and tools nodes; leave room for all fifty.
RECURSION_LIMIT = 10 * TURNS
PROMPT = "Read the build log page by page, then say what failed."


@tool
def read_log(page: int) -> str:
    """Read one page of the build log."""
    return log_page(page)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=WINDOW, validator="formats") as s:
        yield s


def model(server: ScriptedLLMServer) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test", max_retries=0)  # type: ignore[arg-type]


def run(server: ScriptedLLMServer, middleware: ContextfoldMiddleware, *, thread: str = "t1") -> dict:
    agent = create_agent(model(server), tools=[read_log], system_prompt=PROMPT, middleware=[middleware],
                         checkpointer=InMemorySaver())
    return agent.invoke({"messages": [HumanMessage("Why does the build fail?")]},
                        config={"recursion_limit": RECURSION_LIMIT, "configurable": {"thread_id": thread}})


def test_before_model_persists_the_compacted_history(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    cm = make_manager("lc-before")
    middleware = ContextfoldMiddleware(cm)
    state = run(server, middleware)
    assert state["messages"][-1].content == FINAL_ANSWER
    assert_scenario_held(server, cm)
    assert middleware.updates >= 1
    # The state holds the compacted history, not fifty log pages.
    tool_outputs = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    # masked (a ref kept, the page readable by it) or compacted away: far fewer than fifty pages remain
    pages = [x for x in tool_outputs if "tool output trimmed" not in str(x.content)]
    assert len(pages) < TURNS // 2
    assert sum(len(str(m.content)) for m in state["messages"]) < sum(len(log_page(p)) for p in range(TURNS)) // 4
    # Every request carries the system prompt once, first.
    assert all(r.items[0] == {"role": "system", "content": PROMPT} for r in server.requests)
    assert cm.usage_total.input > 0


def test_wrap_model_call_keeps_the_state_whole(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    cm = make_manager("lc-wrap")
    middleware = ContextfoldMiddleware(cm, mode="wrap_model_call")
    state = run(server, middleware)
    assert state["messages"][-1].content == FINAL_ANSWER
    assert_scenario_held(server, cm)
    assert middleware.updates == 0
    outputs = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
    assert outputs == [log_page(p) for p in range(TURNS)]


def test_without_the_middleware_the_same_run_overflows(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    agent = create_agent(model(server), tools=[read_log], system_prompt=PROMPT)
    with pytest.raises(Exception, match="maximum context length"):
        agent.invoke({"messages": [HumanMessage("Why does the build fail?")]},
                     config={"recursion_limit": RECURSION_LIMIT})
    assert server.requests[-1].status == 400


def test_async_agent_and_a_manager_per_thread(server: ScriptedLLMServer) -> None:
    managers: dict[str, object] = {}

    def factory(thread_id: str):  # type: ignore[no-untyped-def]
        managers[thread_id] = make_manager(f"lc-{thread_id}")
        return managers[thread_id]

    turns = 12  # enough to overflow the window; the 50-turn run is covered by the sync tests
    server.push(*scripted_replies(turns))
    middleware = ContextfoldMiddleware(manager_factory=factory)
    agent = create_agent(model(server), tools=[read_log], system_prompt=PROMPT, middleware=[middleware],
                         checkpointer=InMemorySaver())
    state = asyncio.run(agent.ainvoke({"messages": [HumanMessage("Why does the build fail?")]},
                                      config={"recursion_limit": RECURSION_LIMIT,
                                              "configurable": {"thread_id": "async-thread"}}))
    assert state["messages"][-1].content == FINAL_ANSWER
    assert list(managers) == ["async-thread"]
    assert_scenario_held(server, middleware.conversation_manager("async-thread"), turns)


def test_conversion_round_trips_and_keeps_unchanged_originals() -> None:
    history = [SystemMessage("sys", id="s"), HumanMessage([{"type": "text", "text": "hi"},
                                                           {"type": "image", "url": "http://x/a.png"}], id="h"),
               AIMessage("", tool_calls=[{"name": "read_log", "args": {"page": 1}, "id": "c1"}], id="a",
                         usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}),
               ToolMessage("page one", tool_call_id="c1", name="read_log", id="t")]
    origins = Origins()
    converted = from_langchain(history, origins)
    assert [m.role for m in converted] == ["system", "user", "assistant", "tool"]
    assert converted[2].tool_calls[0].parsed_arguments() == {"page": 1}
    back = to_langchain(converted, origins)
    assert all(a is b for a, b in zip(back, history, strict=True))
    masked = converted[3].with_content("[masked]")
    rebuilt = to_langchain([*converted[:3], masked], origins)
    assert rebuilt[3] is not history[3]
    assert (rebuilt[3].content, rebuilt[3].tool_call_id, rebuilt[3].id) == ("[masked]", "c1", "t")
    # The rebuilt message is now the one answered for that Message.
    assert to_langchain([*converted[:3], masked], origins)[3] is rebuilt[3]


def test_bad_input_names_the_index() -> None:
    with pytest.raises(InvalidHistory, match="message 1"):
        from_langchain([HumanMessage("ok"), AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": ""}])])
    with pytest.raises(ConfigError, match="mode"):
        ContextfoldMiddleware(make_manager("x"), mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ContextfoldMiddleware()


turns = st.lists(st.tuples(st.sampled_from(["text", "tools"]), st.text(max_size=20), st.integers(0, 3)),
                 min_size=1, max_size=8)


def conversation(spec: list[tuple[str, str, int]]) -> list:  # type: ignore[type-arg]
    out: list = [HumanMessage("start", id="u0")]  # type: ignore[type-arg]
    for t, (kind, text, calls) in enumerate(spec):
        if kind == "text":
            out += [AIMessage(text, id=f"a{t}"), HumanMessage(f"next {t}", id=f"u{t + 1}")]
            continue
        ids = [f"c{t}_{k}" for k in range(calls)]
        out.append(AIMessage(text, id=f"a{t}", tool_calls=[{"name": "f", "args": {"k": k, "s": text}, "id": i}
                                                              for k, i in enumerate(ids)]))
        out += [ToolMessage(f"{text} result {i}", tool_call_id=i, name="f", id=f"t{i}") for i in ids]
    return out


@settings(max_examples=50, deadline=None)
@given(spec=turns, mask=st.integers(min_value=0))
def test_conversion_properties(spec: list[tuple[str, str, int]], mask: int) -> None:
    history = conversation(spec)
    origins = Origins()
    converted = from_langchain(history, origins)
    # Unchanged Messages come back as the very LangChain objects.
    assert all(a is b for a, b in zip(to_langchain(converted, origins), history, strict=True))
    # A changed message keeps its identity fields (id, tool call id) and only its content changes.
    i = mask % len(converted)
    changed = [*converted[:i], converted[i].with_content("[changed]"), *converted[i + 1:]]
    back = to_langchain(changed, origins)
    assert back[i].id == history[i].id and back[i].content == "[changed]"
    assert getattr(back[i], "tool_call_id", None) == getattr(history[i], "tool_call_id", None)
    assert [m.id for m in back] == [m.id for m in history]
