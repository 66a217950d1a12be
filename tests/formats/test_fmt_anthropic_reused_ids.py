"""A tool call id used again in a later turn (OpenAI's APIs take it; gpt-4o's ids come back in 49 of the 200 tau-bench
sessions) is sent to Anthropic under a name of its own: the API takes each ``tool_use`` id once per request."""

from __future__ import annotations

import json

import pytest
from _fmt_helpers import call
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.errors import InvalidHistory
from contextfold.formats import anthropic
from contextfold.manager import ContextManager
from contextfold.messages import Message


def turn(call_id: str, output: str) -> list[Message]:
    return [Message.assistant("", [call(call_id, "search", json.dumps({"q": output}))]), Message.tool(call_id, output)]


def uses_and_results(body: dict[str, object]) -> list[tuple[str, str]]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [(block["type"], block.get("id") or block["tool_use_id"]) for m in messages
            if isinstance(m["content"], list) for block in m["content"] if block["type"] in ("tool_use", "tool_result")]


def test_a_reused_id_gets_a_name_of_its_own_and_its_results_follow_it() -> None:
    history = [Message.user("find flights"), *turn("call_A", "first"), *turn("call_B", "second"),
               *turn("call_A", "third"), Message.user("again"), *turn("call_A", "fourth")]
    body = anthropic.encode_request(history)
    anthropic.validate(body["messages"])
    assert uses_and_results(body) == [
        ("tool_use", "call_A"), ("tool_result", "call_A"), ("tool_use", "call_B"), ("tool_result", "call_B"),
        ("tool_use", "call_A_2"), ("tool_result", "call_A_2"), ("tool_use", "call_A_3"), ("tool_result", "call_A_3")]
    # and the same history gives the same names (the prompt cache's prefix stays)
    assert anthropic.encode_request(history) == body


def test_a_new_name_never_meets_an_id_sent_before_it() -> None:
    history = [Message.user("go"), *turn("x", "1"), *turn("x_2", "2"), *turn("x", "3")]
    assert [i for _, i in uses_and_results(anthropic.encode_request(history))][::2] == ["x", "x_2", "x_3"]


def test_a_refused_and_reused_id_is_renamed_for_both() -> None:
    history = [Message.user("go"), *turn("functions.search:0", "1"), *turn("functions.search:0", "2")]
    body = anthropic.encode_request(history)
    anthropic.validate(body["messages"])
    first, _, second, _ = (i for _, i in uses_and_results(body))
    assert first.startswith("functions_search_0_") and second == f"{first}_2"


def test_validate_refuses_an_id_used_in_two_turns() -> None:
    items = anthropic.encode([Message.user("go"), *turn("c", "1")])
    items = [*items, {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "2"}]}]
    with pytest.raises(InvalidHistory, match="duplicate tool_use id 'c'") as info:
        anthropic.validate(items)
    assert (info.value.index, info.value.field) == (3, "content[0].id")


def test_the_manager_sends_a_tau_bench_style_history_anthropic_accepts() -> None:
    cm = ContextManager("claude-sonnet-4-5", max_context_tokens=200_000, store="memory", archive=False)
    cm.add([Message.user("change my flight"), *turn("call_A", "reservation"), *turn("call_A", "flights")])
    body = cm.prepare(format="anthropic")
    anthropic.validate(body["messages"])
    assert [i for _, i in uses_and_results(body)] == ["call_A", "call_A", "call_A_2", "call_A_2"]


# A few ids, some shaped like the renames (x_2), so that reuses and real ids meeting a rename are frequent.
_IDS = st.sampled_from(["x", "x_2", "x_3", "x_2_2", "y", "y_2"])
# One turn: an assistant calling distinct ids, then one result for each.
_TURN = st.lists(_IDS, min_size=1, max_size=3, unique=True)


def _history(turns: list[list[str]]) -> list[Message]:
    history = [Message.user("go")]
    for number, ids in enumerate(turns):
        history.append(Message.assistant("", [call(i, "f", json.dumps({"turn": number, "id": i})) for i in ids]))
        history.extend(Message.tool(i, f"{number}:{i}") for i in ids)
    return history


@settings(max_examples=300, deadline=None)
@given(st.lists(_TURN, max_size=6), st.lists(_TURN, min_size=1, max_size=4))
def test_a_later_turn_never_renames_the_calls_before_it(before: list[list[str]], later: list[list[str]]) -> None:
    prefix = anthropic.encode(_history(before))
    whole = anthropic.encode(_history(before + later))
    assert whole[:len(prefix)] == prefix  # the sent prefix (the prompt cache's) stays as it was
    anthropic.validate(whole)
    pairs = uses_and_results({"messages": whole})
    uses = [i for kind, i in pairs if kind == "tool_use"]
    assert len(uses) == len(set(uses))
    # each result answers its own call: the call's input names the turn and id the result's text names
    inputs = {b["id"]: b["input"] for m in whole if isinstance(m["content"], list) for b in m["content"]
              if b["type"] == "tool_use"}
    for m in whole:
        for block in m["content"] if isinstance(m["content"], list) else ():
            if block["type"] == "tool_result":
                asked = inputs[block["tool_use_id"]]
                assert block["content"] == f"{asked['turn']}:{asked['id']}"


def test_a_real_id_equal_to_an_earlier_rename_is_renamed_itself() -> None:
    first = [Message.user("go"), *turn("x", "1"), *turn("x", "2")]
    later = [*first, *turn("x_2", "3")]
    assert [i for _, i in uses_and_results(anthropic.encode_request(first))][::2] == ["x", "x_2"]
    assert [i for _, i in uses_and_results(anthropic.encode_request(later))][::2] == ["x", "x_2", "x_2_2"]
