"""A node function that calls the agent and gives the parent only its reply (the "sub-agent" pattern).

``return {"messages": [result["messages"][-1]]}`` is how LangGraph users keep a parent's state short: the run's
tool calls and results stay out of it. The next run starts from the parent's state, which lacks the tool exchanges
the manager was fed. On c2b40e8 that was a divergence: the manager rebuilt its view from scratch on every run (the
whole history re-added, the old view archived again, a ``framework_history_diverged`` warning per run). Now the
manager mirrors the removal: it drops those complete tool exchanges from its view and adds only the new question.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain")
pytest.importorskip("langchain_openai")

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import MessagesState
from test_fw_langgraph_subgraph import PROMPT, TURNS, agent_and_manager, push_turn, server, single_node_parent, thought

from contextfold.manager import ContextManager
from contextfold.manager.reconcile import DIVERGED_CODE, content_key, reconcile
from contextfold.messages import Message, ToolCall
from contextfold.testing.server import ScriptedLLMServer

__all__ = ["server"]  # the fixture, shared with the subgraph tests


def sent(request: Any) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in request.body["messages"]]


def test_a_node_returning_only_the_reply_costs_no_rebuild_and_the_model_sees_the_parents_history(
        server: ScriptedLLMServer) -> None:
    agent, cm, telemetry = agent_and_manager(server, "lc-reply-only")

    def call_agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        result = agent.invoke({"messages": state["messages"]}, config)
        return {"messages": [result["messages"][-1]]}

    parent, config = single_node_parent(call_agent)
    for turn in range(TURNS):
        push_turn(server, turn)
        state = parent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config=config)
        assert [m.content for m in state["messages"]][-2:] == [f"question {turn}", f"answer {turn}"]
    assert cm.framework_history.rebuilds == 0
    assert not [e for e in telemetry.events if getattr(e, "code", "") == DIVERGED_CODE]
    # Each run's first request is what the parent holds, as without contextfold: the earlier runs' tool exchanges
    # are gone from it, the questions and answers are all there, in order.
    firsts = server.requests[0::2]
    for turn, request in enumerate(firsts):
        conversation = [x for pair in ((("user", f"question {k}"), ("assistant", f"answer {k}")) for k in range(turn))
                        for x in pair]
        assert sent(request) == [("system", PROMPT), *conversation, ("user", f"question {turn}")]
    # The second request of a run carries its own tool exchange.
    assert sent(server.requests[-1])[-2][0] == "assistant" and sent(server.requests[-1])[-1][0] == "tool"
    assert sent(server.requests[-1])[-2][1] == thought(TURNS - 1)


# -- reconcile on its own: which removals are mirrored, which still rebuild ---------------------------------------

def item_key(item: dict[str, Any]) -> str:
    return content_key(item, ident=item["id"])


def convert(items: Any) -> list[Message]:
    out = []
    for item in items:
        if item["role"] == "tool":
            out.append(Message.tool(item["call"], item["text"]))
        elif item.get("calls"):
            calls = [ToolCall(c, "read", "{}") for c in item["calls"]]
            out.append(Message("assistant", item["text"], tool_calls=calls))
        else:
            out.append(Message(item["role"], item["text"]))
    return out


def exchange(item: dict[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    if item["role"] == "tool":
        return "result", (item["call"],)
    return ("call", tuple(item["calls"])) if item.get("calls") else None


HISTORY = [{"id": "u1", "role": "user", "text": "q1"},
           {"id": "a1", "role": "assistant", "text": "looking", "calls": ["c1", "c2"]},
           {"id": "t1", "role": "tool", "call": "c1", "text": "one"},
           {"id": "t2", "role": "tool", "call": "c2", "text": "two"},
           {"id": "a2", "role": "assistant", "text": "answer 1"}]


def fed(history: list[dict[str, Any]]) -> ContextManager:
    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    reconcile(cm, "fw", history, key=item_key, convert=convert, exchange=exchange)
    return cm


def test_complete_tool_exchanges_removed_by_the_framework_leave_the_view_without_a_rebuild() -> None:
    cm = fed(HISTORY)
    later = [HISTORY[0], HISTORY[4], {"id": "u2", "role": "user", "text": "q2"}]
    outcome = reconcile(cm, "fw", later, key=item_key, convert=convert, exchange=exchange)
    assert (outcome.fresh, outcome.rebuilt, cm.framework_history.rebuilds) == (1, False, 0)
    assert [(m.role, m.text) for m in cm.messages()] == [("user", "q1"), ("assistant", "answer 1"), ("user", "q2")]


@pytest.mark.parametrize("kept", [
    [0, 1, 2, 4],  # a call whose second result is gone: not a complete exchange
    [0, 2, 3, 4],  # the results without their call
    [1, 2, 3, 4],  # the user's question removed
    [0, 1, 2, 3],  # the answer removed
])
def test_any_other_removal_still_rebuilds_from_the_framework(kept: list[int]) -> None:
    cm = fed(HISTORY)
    later = [HISTORY[i] for i in kept]
    outcome = reconcile(cm, "fw", later, key=item_key, convert=convert, exchange=exchange)
    assert outcome.rebuilt and cm.framework_history.rebuilds == 1
    # The view is the framework's history as it now is (made valid as any history: a call without its result gets
    # a placeholder, a result without its call leaves, a view opening on the assistant gets a user line).
    texts = [m.text for m in cm.messages()]
    assert texts[-1] == HISTORY[kept[-1]]["text"]
    assert not [h["text"] for i, h in enumerate(HISTORY) if i not in kept and h["text"] in texts]


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int]]:
    """A history of runs (question, tool exchanges, answer) and which exchanges the framework drops after it."""
    history: list[dict[str, Any]] = []
    exchanges: list[list[int]] = []
    for run in range(draw(st.integers(1, 4))):
        history.append({"id": f"q{run}", "role": "user", "text": f"question {run}"})
        for call in range(draw(st.integers(0, 3))):
            ids = [f"c{run}_{call}_{k}" for k in range(draw(st.integers(1, 2)))]
            start = len(history)
            history.append({"id": f"a{run}_{call}", "role": "assistant", "text": f"step {run}.{call}", "calls": ids})
            history += [{"id": f"t{c}", "role": "tool", "call": c, "text": f"output of {c}"} for c in ids]
            exchanges.append(list(range(start, len(history))))
        history.append({"id": f"r{run}", "role": "assistant", "text": f"answer {run}"})
    dropped = draw(st.lists(st.sampled_from(exchanges), unique_by=tuple)) if exchanges else []
    return history, sorted(i for exchange in dropped for i in exchange)


@settings(max_examples=20, deadline=None)
@given(runs())
def test_mirroring_dropped_exchanges_gives_the_view_a_rebuild_would(
        case: tuple[list[dict[str, Any]], list[int]]) -> None:
    history, dropped = case
    later = [h for i, h in enumerate(history) if i not in dropped] + [{"id": "new", "role": "user", "text": "next"}]
    mirrored = fed(history)
    outcome = reconcile(mirrored, "fw", later, key=item_key, convert=convert, exchange=exchange)
    assert outcome.rebuilt is False and mirrored.framework_history.rebuilds == 0
    assert outcome.fresh == 1
    fresh = fed(later)
    assert [(m.role, m.text, m.tool_call_id) for m in mirrored.messages()] == \
        [(m.role, m.text, m.tool_call_id) for m in fresh.messages()]
