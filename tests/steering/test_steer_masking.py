"""Masking takes superseded reads first, before any older output that is still current; the order is steering's."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.steering import ToolPolicies, mask_order
from contextfold.stores.memory import MemoryBlobStore
from contextfold.telemetry import RecordingTelemetry
from contextfold.tokens import EstimatingCounter, MessageCounter

COUNTER = MessageCounter(EstimatingCounter())


def view_file(i: int, path: str, lines: tuple[int, int] | None = None) -> list[Message]:
    arguments: dict[str, object] = {"command": "view", "path": path}
    if lines is not None:
        arguments["view_range"] = list(lines)
    call = ToolCall(f"c{i}", "str_replace_editor", json.dumps(arguments))
    body = "".join(f"{n:6}\tdef function_{n}_{path.replace('/', '_')}(): return {n * i}\n" for n in range(1, 120))
    return [Message.assistant(f"look at {path}", (call,)), Message.tool(call.id, body)]


def session() -> list[Message]:
    """An older current read (b.py), a read of a.py, then a.py read again wider: the a.py read is stale."""
    return [Message.system("agent"), Message.user("fix the bug"),
            *view_file(1, "/repo/b.py"), *view_file(2, "/repo/a.py", (10, 50)), *view_file(3, "/repo/c.py"),
            *view_file(4, "/repo/a.py"), *view_file(5, "/repo/d.py"), *view_file(6, "/repo/e.py")]


def test_the_superseded_read_is_masked_before_the_older_current_one() -> None:
    messages = session()
    order = mask_order(messages, ToolPolicies())
    stale = 5  # the result of the a.py read of lines 10-50
    assert order.first == (stale,) and order.superseded == {stale: 8}
    cache = ToolOutputCache(MemoryBlobStore())
    one_output = COUNTER.count_message(messages[3])
    budget = sum(COUNTER.count_message(m) for m in messages if m.role == "tool") - one_output // 2
    with_order = mask_tool_outputs(messages, budget_tokens=budget, counter=COUNTER, cache=cache, clear_at_least=0,
                                   keep_tool_io_pairs=2, first=order.first, exempt=order.exempt)
    assert with_order.masked_indices == (stale,)
    plain = mask_tool_outputs(messages, budget_tokens=budget, counter=COUNTER, cache=cache, clear_at_least=0,
                              keep_tool_io_pairs=2)
    assert plain.masked_indices == (3,)  # oldest first: b.py, which is still current


def test_the_order_never_makes_a_recent_or_answered_output_eligible() -> None:
    messages = [Message.user("go"), *view_file(1, "/r/x.py", (1, 40)), *view_file(2, "/r/y.py"),
                *view_file(3, "/r/x.py")]
    order = mask_order(messages, ToolPolicies())
    assert order.first == (2,)
    cache = ToolOutputCache(MemoryBlobStore())

    def masked(keep: int, first: tuple[int, ...] = order.first,
               exempt: frozenset[int] = frozenset()) -> tuple[int, ...]:
        return mask_tool_outputs(messages, budget_tokens=0, counter=COUNTER, cache=cache, clear_at_least=0,
                                 keep_tool_io_pairs=keep, first=first, exempt=exempt).masked_indices

    assert masked(keep=3) == ()  # the stale read is among the last three pairs: kept like them
    assert masked(keep=2) == (2,)  # ... and first to go once it is older than them
    assert masked(keep=0, first=(6, 2)) == (2, 4)  # the answered result stays even when asked for first
    assert masked(keep=0, exempt=frozenset({2})) == (4,)


def manager(**policy: object) -> ContextManager:
    # Outputs stay whole at write time (~1,900 tokens each); tool outputs over 5,800 tokens are masked: of four
    # outputs, one has to go. Masking on the thresholds alone (cache_aware off): which output goes is the question
    # here, not whether a masking of ~1,900 tokens pays for the prompt cache it costs.
    return ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory", session_id="sup",
                          policy={"clear_at_least": 0, "keep_tool_io_pairs": 1, "tool_output_budget_tokens": 5_800,
                                  "cache_aware": False, **policy},
                          tool_output={"max_message_tokens": 4_000}, telemetry=RecordingTelemetry())


def test_the_manager_masks_superseded_reads_first_and_the_switch_turns_it_off() -> None:
    on, off = manager(), manager(superseded_reads=False)
    for cm in (on, off):
        cm.add(session()[:10])  # up to the wider a.py read
        cm.prepare()
    masked_on = [m.tool_call_id for m in on.messages() if m.kind == "masked"]
    masked_off = [m.tool_call_id for m in off.messages() if m.kind == "masked"]
    assert masked_on == ["c2"]  # the stale a.py read goes first
    assert masked_off == ["c1"]  # oldest first without the rule: b.py, still current
    assert on.steering.since.masked == len(masked_on)


edits = st.lists(st.tuples(st.sampled_from(["read", "edit", "other"]), st.sampled_from(["p", "q"]),
                           st.integers(1, 3)), min_size=1, max_size=14)


@settings(max_examples=100, deadline=None)
@given(edits, st.integers(0, 4))
def test_masking_with_any_order_keeps_the_answered_results_and_only_masks_tool_text(
        steps: list[tuple[str, str, int]], keep: int) -> None:
    messages = [Message.user("go")]
    for i, (kind, path, size) in enumerate(steps):
        name = {"read": "read_file", "edit": "write_file", "other": "bash"}[kind]
        call = ToolCall(f"c{i}", name, json.dumps({"path": path}))
        messages += [Message.assistant("", (call,)), Message.tool(call.id, f"{path} v{i}\n" * 40 * size)]
    order = mask_order(messages, ToolPolicies())
    result = mask_tool_outputs(messages, budget_tokens=0, counter=COUNTER, cache=ToolOutputCache(MemoryBlobStore()),
                               clear_at_least=0, keep_tool_io_pairs=keep, first=order.first, exempt=order.exempt)
    assert result.messages[-1] == messages[-1]  # the answered result
    for i in result.masked_indices:
        assert messages[i].role == "tool" and result.messages[i].kind == "masked"
    stale_first = [i for i in result.masked_indices if i in order.superseded]
    assert stale_first == [i for i in order.first if i in result.masked_indices]
