"""normalize(): every invariant, on hand-made and random histories."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.errors import InvalidHistory
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCall
from contextfold.pairing import (
    ABORTED_OUTPUT_TEXT,
    check_messages,
    for_summarizer,
    normalize,
    partner_indices,
    remove_messages,
    safe_split_points,
    tool_pairs,
)


def call(i: int, name: str = "bash") -> ToolCall:
    return ToolCall(f"call_{i}", name, '{"cmd": "ls"}')


def assert_paired(history: list[Message]) -> None:
    """Every call is answered by the tool messages right after its assistant turn, and nothing else is."""
    i = 0
    while i < len(history):
        m = history[i]
        assert m.role != "tool", f"orphan result at {i}: {m.tool_call_id}"
        i += 1
        if m.role == "assistant" and m.tool_calls:
            ids = []
            while i < len(history) and history[i].role == "tool":
                ids.append(history[i].tool_call_id)
                i += 1
            assert ids == [c.id for c in m.tool_calls]


def test_missing_output_gets_aborted_result_right_after_call() -> None:
    history = [Message.user("go"), Message.assistant("", [call(1), call(2)]), Message.tool("call_1", "ok"),
               Message.user("next")]
    out = normalize(history)
    assert [m.role for m in out] == ["user", "assistant", "tool", "tool", "user"]
    assert out[3].tool_call_id == "call_2" and out[3].text == ABORTED_OUTPUT_TEXT
    assert out[3].meta["kind"] == "aborted_output"


def test_orphan_and_duplicate_results_removed() -> None:
    history = [Message.user("go"), Message.tool("ghost", "x"), Message.assistant("", [call(1)]),
               Message.tool("call_1", "first"), Message.tool("call_1", "again")]
    out = normalize(history)
    assert [m.text for m in out if m.role == "tool"] == ["first"]


def test_late_result_moves_after_its_call() -> None:
    history = [Message.user("go"), Message.assistant("", [call(1)]), Message.user("hurry"),
               Message.tool("call_1", "done")]
    out = normalize(history)
    assert [m.role for m in out] == ["user", "assistant", "tool", "user"]


def test_thinking_stays_with_calls() -> None:
    a = Message("assistant", (ThinkingPart("plan", signature="sig"), TextPart("run")), (call(1),))
    out = normalize([Message.user("go"), a, Message.tool("call_1", "ok")])
    assert out[1] is a


def test_leading_assistant_gets_a_user_turn() -> None:
    out = normalize([Message.system("s"), Message.assistant("hello")])
    assert [m.role for m in out] == ["system", "user", "assistant"]
    assert normalize(out) == out


def test_trailing_calls_reduced_for_summarizer() -> None:
    history = [Message.user("go"), Message.assistant("let me look", [call(1)])]
    out = for_summarizer(history)
    assert out[-1].role == "assistant" and out[-1].text == "let me look" and not out[-1].tool_calls
    assert for_summarizer([Message.user("go"), Message.assistant("", [call(1)])]) == [Message.user("go")]


def test_removing_a_result_takes_its_call_out() -> None:
    history = [Message.user("go"), Message.assistant("two", [call(1), call(2)]), Message.tool("call_1", "a"),
               Message.tool("call_2", "b")]
    out = remove_messages(history, [2])
    assert [c.id for c in out[1].tool_calls] == ["call_2"] and len(out) == 3
    assert partner_indices(history, 1) == {2, 3}
    assert partner_indices(history, 3) == {1}
    assert remove_messages(history, [1]) == [history[0]]


def test_split_points_never_cut_a_pair() -> None:
    history = [Message.user("go"), Message.assistant("", [call(1)]), Message.tool("call_1", "a"),
               Message.assistant("done")]
    assert safe_split_points(history) == [0, 1, 3, 4]


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (Message("robot", "x"), "role"),  # type: ignore[arg-type]
        (Message("tool", "x"), "tool_call_id"),
        (Message("assistant", "", (ToolCall("c", "f", "{not json"),)), "tool_calls[0].arguments"),
        (Message("user", "", (ToolCall("c", "f"),)), "tool_calls"),
        (Message("assistant", "", (ToolCall("", "f"),)), "tool_calls[0].id"),
    ],
)
def test_check_names_index_and_field(message: Message, field: str) -> None:
    with pytest.raises(InvalidHistory) as info:
        check_messages([Message.user("ok"), message])
    assert info.value.index == 1 and info.value.field == field
    assert str(info.value).startswith(f"message 1: {field}: ")


def test_check_rejects_non_message() -> None:
    with pytest.raises(InvalidHistory, match="message 0: expected a Message, got dict"):
        check_messages([{"role": "user"}])


# -- properties ---------------------------------------------------------------------------------------------------

@st.composite
def messy_histories(draw: st.DrawFn) -> list[Message]:
    """Valid-looking histories, then damaged: shuffled results, removals, duplicates, ghosts."""
    out: list[Message] = [Message.system("sys")] if draw(st.booleans()) else []
    n_turns = draw(st.integers(0, 8))
    k = 0
    for _ in range(n_turns):
        kind = draw(st.sampled_from(["user", "text", "tools", "empty"]))
        if kind == "user":
            out.append(Message.user(draw(st.sampled_from(["hi", "do it", " "]))))
        elif kind == "text":
            out.append(Message.assistant(draw(st.sampled_from(["ok", ""]))))
        elif kind == "tools":
            n = draw(st.integers(1, 3))
            calls = [call(k + j) for j in range(n)]
            k += n
            out.append(Message.assistant(draw(st.sampled_from(["", "running"])), calls))
            out.extend(Message.tool(c.id, f"out {c.id}") for c in calls)
        else:
            out.append(Message("user", ""))
    # damage
    ops = draw(st.lists(st.tuples(st.sampled_from(["del", "swap", "dup", "ghost"]), st.integers(0, 50)), max_size=6))
    for op, pos in ops:
        if not out:
            break
        i = pos % len(out)
        if op == "del":
            del out[i]
        elif op == "swap" and i + 1 < len(out):
            out[i], out[i + 1] = out[i + 1], out[i]
        elif op == "dup":
            out.insert(i, out[i])
        elif op == "ghost":
            out.insert(i, Message.tool(f"ghost_{pos}", "boo"))
    return out


@given(messy_histories())
@settings(max_examples=300, deadline=None)
def test_normalize_is_idempotent_and_paired(history: list[Message]) -> None:
    out = normalize(history)
    assert normalize(out) == out
    assert_paired(out)
    # nothing a provider needs is invented except aborted outputs and the leading user turn
    originals = set(map(id, history))
    texts = {m.text for m in history if m.role == "assistant"}
    for m in out:
        stripped_duplicate_call = m.role == "assistant" and m.text in texts
        assert id(m) in originals or stripped_duplicate_call or m.meta.get("kind") in {"aborted_output", "placeholder"}


@given(messy_histories(), st.lists(st.integers(0, 40), max_size=5))
@settings(max_examples=300, deadline=None)
def test_removal_then_normalize_stays_paired(history: list[Message], picks: list[int]) -> None:
    base = normalize(history)
    if not base:
        return
    out = normalize(remove_messages(base, {p % len(base) for p in picks}))
    assert_paired(out)
    assert normalize(out) == out


@given(messy_histories())
@settings(max_examples=200, deadline=None)
def test_split_points_property(history: list[Message]) -> None:
    base = normalize(history)
    points = safe_split_points(base)
    assert 0 in points and len(base) in points
    for p in points:
        for c, r in tool_pairs(base).values():
            assert r is None or not (c < p <= r)


def test_ids_reused_across_turns_stay_paired() -> None:
    history = [Message.user("go"), Message.assistant("", [call(1)]), Message.tool("call_1", "first"),
               Message.assistant("", [call(1)]), Message.tool("call_1", "second"), Message.assistant("done")]
    assert normalize(history) == history
    assert safe_split_points(history) == [0, 1, 3, 5, 6]
    assert partner_indices(history, 4) == {3}
    out = remove_messages(history, [2])
    assert [m.text for m in out if m.role == "tool"] == ["second"]
    assert normalize(out) == out


def test_real_sessions_pass_through_normalize_unchanged() -> None:
    from conftest import TRAJECTORIES, require

    require(TRAJECTORIES.is_dir(), "shared data missing")
    from contextfold.importers._files import load_sessions

    for s in load_sessions(TRAJECTORIES / "taubench-airline") + load_sessions(TRAJECTORIES / "sweagent-claude4sonnet"):
        assert normalize(s.messages) == s.messages, s.id


@given(messy_histories(), st.lists(st.integers(0, 40), max_size=5))
@settings(max_examples=200, deadline=None)
def test_normalized_histories_pass_every_format_validator(history: list[Message], picks: list[int]) -> None:
    from contextfold.formats import FORMATS

    base = normalize(history)
    out = normalize(remove_messages(base, {p % len(base) for p in picks})) if base else base
    if not any(m.role not in ("system", "developer") for m in out):
        return  # no conversation left: every API needs at least one message besides the instructions
    for name, wire in FORMATS.items():
        try:
            wire.validate(wire.encode(out))
        except Exception as exc:  # pragma: no cover - the assertion message is the point
            raise AssertionError(f"{name} rejects a normalized history: {exc}") from exc


def _tool_pairs_reference(messages: list[Message]) -> dict[str, tuple[int, int | None]]:
    """tool_pairs' keys the plain way: the first free "<id>#<n>", counting n up from 1 for every reuse."""
    from contextfold.pairing import pair_list

    out: dict[str, tuple[int, int | None]] = {}
    for pair in pair_list(messages):
        key, n = pair.call_id, 1
        while key in out:
            key, n = f"{pair.call_id}#{n}", n + 1
        out[key] = (pair.call_index, pair.result_index)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "a#1", "a#2", "a#1#1"]), max_size=30))
def test_tool_pairs_keys_every_reuse_as_the_plain_loop_does(ids: list[str]) -> None:
    messages = [m for i in ids for m in (Message.assistant("", [ToolCall(i, "x", "{}")]), Message.tool(i, "r"))]
    assert list(tool_pairs(messages).items()) == list(_tool_pairs_reference(messages).items())


def test_tool_pairs_numbers_ten_thousand_reuses_of_one_id() -> None:
    # Counting the suffix up from 1 on every reuse was quadratic (50M dict lookups here; 100,000 repeated
    # SWE-agent messages spent minutes in it).
    messages = [m for _ in range(10_000) for m in (Message.assistant("", [ToolCall("call_1", "x", "{}")]),
                                                   Message.tool("call_1", "r"))]
    keys = list(tool_pairs(messages))
    assert keys[:3] == ["call_1", "call_1#1", "call_1#2"] and keys[-1] == "call_1#9999"
