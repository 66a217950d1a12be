"""The compaction engine on hand-built histories: layout, summaries, protection, fitting and errors."""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.compaction import CompactionResult, Policy, compact, plan_compaction
from contextfold.compaction._rebuild import SUMMARY_PREFIX
from contextfold.errors import ConfigError, InsufficientBudget, InvalidHistory, SummarizerError
from contextfold.messages import Message, ToolCall
from contextfold.summarize.base import SummaryRequest, SummaryResult

try:  # tests/ as a package (tests/__init__.py) or as a plain folder on sys.path
    from tests.test_compact_support import EchoSummarizer, assert_valid, clock, counter, summaries
except ImportError:
    from test_compact_support import EchoSummarizer, assert_valid, clock, counter, summaries  # type: ignore[no-redef]

BIG = "word " * 400  # ~500 tokens with the 4-chars estimate


def _session(steps: int = 12, *, output: str = BIG) -> list[Message]:
    """system, a task, then ``steps`` tool steps, a user follow-up in the middle, and a final answer."""
    out = [Message.system("You are a coding agent."), Message.user("Fix the bug in src/app.py. KEEP: ticket-7")]
    for i in range(steps):
        if i == steps // 2:
            out.append(Message.user(f"Also keep the API stable (request {i})."))
        call = ToolCall(f"c{i}", "bash", f'{{"cmd": "step {i}"}}')
        out.append(Message.assistant(f"step {i}", [call]))
        out.append(Message.tool(f"c{i}", f"output {i} " + output, name="bash"))
    out.append(Message.assistant("Done."))
    return out


def _run(messages: list[Message], budget: int = 3_000, policy: Policy | None = None,
         **kw: Any) -> tuple[CompactionResult, EchoSummarizer]:
    summ = EchoSummarizer()
    result = compact(messages, policy=policy or Policy(), counter=counter(), summarizer=summ, budget=budget,
                     clock=clock, **kw)
    return result, summ


ONE_TURN = Policy(keep_recent_turns=1)


def test_hard_layout_order_and_summary_metadata() -> None:
    msgs = _session()
    result, summ = _run(msgs, budget=6_000, policy=ONE_TURN)
    out = result.messages
    assert_valid(out)
    assert out[0] is msgs[0]  # pinned system prompt first, the same object
    kinds = [m.kind for m in out]
    assert kinds[1] == "retain"
    assert "ticket-7" in out[1].text
    s_index = kinds.index("summary")
    # user requests that left the compacted part sit between the retain block and the summary
    assert all(m.role == "user" for m in out[2:s_index])
    summary = out[s_index]
    assert summary.role == "user"
    assert summary.text.startswith(f"{SUMMARY_PREFIX} v1 — ")
    meta = summary.meta
    assert meta["summary_version"] == 1
    assert meta["compacted_count"] == len(result.summarized) > 0
    assert meta["original_token_count"] > meta["summary_token_count"] > 0
    assert meta["compacted_at"] == "2025-01-02T03:04:05+00:00"
    # the recent tail: last 4 tool pairs (8 messages) and the final answer, in original order
    tail = out[s_index + 1:]
    assert [m.tool_call_id for m in tail if m.role == "tool"] == ["c8", "c9", "c10", "c11"]
    assert tail[-1] is msgs[-1]
    assert counter().count_messages(out) <= 6_000
    # the summarizer read what left, never the system prompt, never a previous summary
    (request,) = summ.requests
    assert msgs[0] not in request.messages and request.previous_summary is None


def test_removed_is_what_left_the_view_in_order() -> None:
    msgs = _session()
    result, _ = _run(msgs, budget=6_000, policy=ONE_TURN)
    out_ids = {id(m) for m in result.messages}
    expected = [m for m in msgs if id(m) not in out_ids]
    assert result.removed == expected
    assert result.stats.messages_before == len(msgs)
    assert result.stats.messages_after == len(result.messages)
    assert result.stats.tokens_after < result.stats.tokens_before
    kept = result.stats.kept
    assert kept["pinned"] == 1 and kept["retained_facts"] == 1 and kept["recent"] >= 9
    assert result.stats.to_dict()["kept"] == dict(kept)


def test_recompaction_folds_the_summary_and_increments_the_version() -> None:
    msgs = _session()
    first, _ = _run(msgs, policy=ONE_TURN)
    grown = [*first.messages, *_session(8, output="more " * 300)[2:]]
    second, summ = _run(grown, compaction_count=1, policy=ONE_TURN)
    out = second.messages
    (summary,) = summaries(out)
    assert summary.meta["summary_version"] == 2
    assert "[contextfold summary" not in summary.text.split("\n", 1)[1]  # never nested
    (request,) = summ.requests
    assert request.previous_summary is not None and "previously" not in request.previous_summary.split("\n")[0]
    assert all(m.kind != "summary" for m in request.messages)  # never treated as a user message
    assert first.summary_message is not None
    assert summary.meta["compacted_count"] > first.summary_message.meta["compacted_count"]
    # the first retain block's fact is carried over, once
    assert sum("ticket-7" in m.text for m in out if m.kind == "retain") == 1
    assert_valid(out)


def _ten_requests() -> tuple[list[Message], Policy]:
    """Ten long user requests, each answered; a user-message budget that keeps only some of them."""
    msgs = [Message.system("sys")]
    for i in range(10):
        msgs.append(Message.user(f"request {i} " + "x " * 200))
        msgs.append(Message.assistant(f"answer {i}"))
    return msgs, Policy(user_message_budget=450, keep_recent_turns=1, keep_tool_io_pairs=0)


def test_user_block_most_recent_first_within_budget() -> None:
    msgs, policy = _ten_requests()
    result, _ = _run(msgs, budget=5_000, policy=policy)
    out = result.messages
    users = [m for m in out if m.role == "user" and m.kind is None]
    # the last turn is kept as recent; of the compacted ones, the most recent that fit 450 tokens, in order
    assert users[-1] is msgs[-2]
    block = users[:-1]
    c = counter()
    assert sum(c.count_message(m) for m in block) <= 450
    first = msgs.index(block[0])
    assert block == msgs[first:-2:2]  # contiguous most recent ones, in original order
    assert sum(c.count_message(m) for m in block) + c.count_message(msgs[first - 2]) > 450
    assert 2 <= len(block) < 9


def test_the_summarizer_is_told_which_requests_stay_verbatim() -> None:
    msgs, policy = _ten_requests()
    result, summ = _run(msgs, budget=5_000, policy=policy)
    (request,) = summ.requests
    staying = [m.text for m in result.messages if m.role == "user" and m.kind is None]
    # exactly the user messages of the new view, in view order; the requests that left are not among them
    assert list(request.verbatim) == staying
    gone = [m.text for m in msgs if m.role == "user" and m.text not in staying]
    assert gone and all(m.text in [r.text for r in request.messages] for m in msgs if m.text in gone)


def test_last_request_kept_even_beyond_user_budget() -> None:
    msgs = [Message.user("first request"), Message.assistant("ok"), Message.user("huge paste please " + "y " * 900),
            Message.assistant("", [ToolCall("a", "bash", "{}")]), Message.tool("a", "out"),
            Message.assistant("working")]
    policy = Policy(user_message_budget=10, keep_recent_turns=0, keep_tool_io_pairs=1)
    result, _ = _run(msgs, budget=5_000, policy=policy)
    assert any(m is msgs[2] for m in result.messages)


def test_turn_aborted_markers_are_kept() -> None:
    marker = Message.user("<turn-aborted>interrupted</turn-aborted>")
    msgs = [Message.user("task " + "z " * 300), marker, Message.assistant("a"), *_session(6)[2:]]
    policy = Policy(user_message_budget=50, retain_last_turns=0, keep_recent_turns=0)
    result, _ = _run(msgs, budget=3_000, policy=policy)
    assert any(m is marker for m in result.messages)


def test_protected_messages_and_tools_survive_as_the_same_objects() -> None:
    msgs = _session()
    pinned_note = Message.user("remember: deploy to staging only", meta={"protected": True})
    call = ToolCall("mem", "memory", '{"op": "read"}')
    mem_call = Message.assistant("", [call])
    mem_result = Message.tool("mem", "the memory file " + "m " * 50, name="memory")
    msgs[2:2] = [pinned_note, mem_call, mem_result]
    result, _ = _run(msgs, budget=6_000, policy=Policy(protected_tools=("memory",), keep_recent_turns=1))
    out = result.messages
    for m in (msgs[0], pinned_note, mem_call, mem_result):
        assert any(o is m for o in out)
    s_index = next(i for i, m in enumerate(out) if m.kind == "summary")
    assert out.index(mem_call) == s_index + 1 and out.index(mem_result) == s_index + 2
    assert out.index(pinned_note) < s_index
    assert_valid(out)


def test_soft_summarizes_the_oldest_half_at_a_safe_split() -> None:
    msgs = _session(10, output="o " * 40)
    result, summ = _run(msgs, budget=50_000, kind="soft")
    out = result.messages
    assert result.stats.kind == "soft"
    compactable = len(msgs) - 1  # all but the system prompt
    assert abs(result.stats.compacted_count - compactable / 2) <= 2
    # everything after the split is kept verbatim, as the same objects, in order
    tail = out[next(i for i, m in enumerate(out) if m.kind == "summary") + 1:]
    assert tail == msgs[len(msgs) - len(tail):]
    assert all(a is b for a, b in zip(tail, msgs[len(msgs) - len(tail):], strict=True))
    assert_valid(out)
    assert len(summ.requests) == 1


def test_soft_that_cannot_fit_escalates_to_hard() -> None:
    msgs = _session(4, output="huge " * 3_000)[:-1]  # ends with a tool output bigger than the budget
    result, _ = _run(msgs, budget=1_500, kind="soft")
    assert result.stats.kind == "hard"
    assert any("compacted hard instead" in w for w in result.warnings)
    assert counter().count_messages(result.messages) <= 1_500


def test_emergency_halves_the_keep_counts() -> None:
    msgs = _session(12, output="e " * 20)
    result, _ = _run(msgs, budget=50_000, kind="emergency")
    stats = result.stats
    assert (stats.keep_turns, stats.keep_pairs) == (3, 2)
    assert [m.tool_call_id for m in result.messages if m.role == "tool"] == ["c10", "c11"]


def test_fit_reduces_keep_counts_and_warns() -> None:
    msgs = _session(12)
    result, _ = _run(msgs, budget=2_000)
    stats = result.stats
    assert stats.keep_pairs is not None and stats.keep_pairs < 4
    assert any("keep counts reduced" in w for w in result.warnings)
    assert counter().count_messages(result.messages) <= 2_000


def test_fit_drops_even_the_last_pair_when_it_alone_is_too_big() -> None:
    msgs = _session(3, output="huge " * 3_000)
    result, _ = _run(msgs, budget=1_500)
    assert counter().count_messages(result.messages) <= 1_500
    assert_valid(result.messages)


def test_insufficient_budget_names_figures_and_remedy() -> None:
    msgs = [Message.system("rules " * 2_000), Message.user("hi"), Message.assistant("hello")]
    with pytest.raises(InsufficientBudget) as info:
        _run(msgs, budget=1_000)
    assert info.value.budget == 1_000 and info.value.needed > 1_000
    assert "roles_never_prune" in str(info.value) and "protected" in str(info.value)


def test_overlong_summary_is_cut_to_its_reserve() -> None:
    msgs = _session(12)
    summ = EchoSummarizer(pad=5_000)
    result = compact(msgs, policy=Policy(summary_max_tokens=300), counter=counter(), summarizer=summ, budget=4_000,
                     clock=clock)
    assert result.summary_message is not None
    assert counter().count_message(result.summary_message) <= 300 + 60  # reserve plus the header framing
    assert any("cut" in w for w in result.warnings)
    assert counter().count_messages(result.messages) <= 4_000


def test_repeated_compaction_warning_carries_the_count() -> None:
    msgs = _session()
    quiet, _ = _run(msgs, compaction_count=0)
    assert not any("compacted" in w and "times" in w for w in quiet.warnings)
    loud, _ = _run(msgs, compaction_count=2, policy=Policy(warn_after_compactions=3))
    assert any("3 times" in w for w in loud.warnings)


def test_output_is_deterministic_with_an_injected_clock() -> None:
    a, _ = _run(_session())
    b, _ = _run(_session())
    assert a.messages == b.messages


def test_nothing_to_compact_returns_the_view_unchanged() -> None:
    msgs = [Message.system("s"), Message.user("hi"), Message.assistant("hello")]
    result, summ = _run(msgs, budget=10_000)
    assert result.messages == msgs and not result.changed
    assert summ.requests == []


def test_instructions_and_directives_reach_the_summarizer() -> None:
    policy = Policy(summary_directives=("list failing tests",), retain_directives=("ticket ids",),
                    strategy="decision_log")
    _, summ = _run(_session(), policy=policy, instructions="keep the failing test names")
    (req,) = summ.requests
    assert req.instructions == "keep the failing test names" and req.strategy == "decision_log"
    assert req.summary_directives == ("list failing tests",) and req.retain_directives == ("ticket ids",)
    assert 0 < req.max_tokens <= 2_000


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(ConfigError, match="kind"):
        _run(_session(), kind="medium")
    with pytest.raises(ConfigError, match="budget"):
        _run(_session(), budget=0)
    with pytest.raises(InvalidHistory, match="message 1: role"):
        _run([Message.user("a"), Message("robot", "b")])  # type: ignore[arg-type]


def test_summarizer_failures_become_summarizer_errors() -> None:
    class Broken:
        def summarize(self, request: SummaryRequest) -> SummaryResult:
            raise RuntimeError("model exploded")

    with pytest.raises(SummarizerError, match="model exploded"):
        compact(_session(), policy=Policy(), counter=counter(), summarizer=Broken(), budget=3_000)


def test_plan_is_a_dry_run() -> None:
    plan = plan_compaction(_session(), policy=Policy(), counter=counter(), budget=3_000)
    assert plan.kind == "hard" and plan.layout.summarized and plan.reserve > 0
    assert plan.layout.estimated_tokens <= 3_000


def test_a_task_stated_after_a_long_preamble_survives_a_compaction_too_long_to_read_whole() -> None:
    # The extractive digest reads the first 200 and the newest 2,800 messages of a slice over 3,000 (issue 12); a
    # task stated at message 250 is in the unread middle. The user-message budget, not the summary, keeps it.
    from contextfold.summarize import ExtractiveSummarizer
    from contextfold.tokens import MessageCounter, TiktokenCounter

    task = "Migrate the billing service to the new ledger API; keep invoice ids INV-2291 and INV-2292 stable."
    preamble = [Message.assistant(f"setup note {i}: environment ready") for i in range(250)]
    work = [Message.assistant(f"progress note {i}: checked module_{i}.py") for i in range(3_200)]
    msgs = [Message.system("You are a coding agent."), *preamble, Message.user(task), *work]
    result = compact(msgs, policy=Policy(keep_recent_turns=1), counter=MessageCounter(TiktokenCounter("o200k_base")),
                     summarizer=ExtractiveSummarizer(), budget=20_000, kind="hard", clock=clock)
    assert len(result.summarized) > 3_000
    assert any(m.text == task for m in result.messages if m.role == "user" and m.kind is None)
    (summary,) = summaries(result.messages)
    assert "in the middle were not read for it" in summary.text  # and the summary says it read the slice at its ends


@pytest.mark.parametrize(("first", "warned"), [(2, [2, 4, 8, 16]), (3, [3, 6, 12]), (1, [1, 2, 4, 8, 16])])
def test_the_repeated_compaction_warning_comes_at_the_threshold_and_each_doubling(first: int,
                                                                                  warned: list[int]) -> None:
    # Issue 21 §6: the warning came with every compaction from the second on (19 of 20 in a 45-turn session).
    msgs = _session()
    said = [done for done in range(1, 21)
            if any(f"{done} times" in w for w in
                   _run(msgs, compaction_count=done - 1, policy=Policy(warn_after_compactions=first))[0].warnings)]
    assert said == warned
