"""The notes the model reads: the budget line (last, counted, never in the history) and the compaction receipt."""

from __future__ import annotations

import json

import pytest

from contextfold.formats import get_format
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.steering import RECEIPT_KIND, SinceLastTurn, receipt_text, status_text
from contextfold.telemetry import RecordingTelemetry

READ_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
              for n in ("tool_output_cache", "tool_output_cache_grep", "history_search")]


def manager(window: int = 16_000, tools: list[dict[str, object]] | None = None, **policy: object) -> ContextManager:
    # Outputs are cut at write time only over 4,000 tokens, whatever the tool-output budget.
    return ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive="memory", session_id="notes",
                          policy=policy, tools=tools or [], telemetry=RecordingTelemetry(),
                          tool_output={"max_message_tokens": 4_000})


def line(tokens: int, window: int = 16_000) -> str:
    return f"[context: {tokens:,} of {window:,} tokens used ({round(100 * tokens / window)}%)]"


def turn(i: int, output: str) -> list[Message]:
    call = ToolCall(f"c{i}", "bash", json.dumps({"command": f"run {i}"}))
    return [Message.assistant(f"step {i}", (call,)), Message.tool(call.id, output)]


def test_the_line_reads_as_the_figures_say() -> None:
    since = SinceLastTurn(masked=2, masked_tokens=3_000, summarized=41)
    assert status_text(tokens=9_870, window=16_000, since=SinceLastTurn(), tools=()) == \
        "[context: 9,870 of 16,000 tokens used (62%)]"
    assert status_text(tokens=9_870, window=16_000, since=since, tools={"tool_output_cache", "history_search"}) == (
        "[context: 9,870 of 16,000 tokens used (62%); since your last turn: 2 older tool outputs replaced by a ref, "
        "tool_output_cache reads them back by ref; 41 earlier messages summarized, history_search finds their "
        "details]")
    # Only tools the agent has are named.
    assert status_text(tokens=9_870, window=16_000, since=since, tools=()) == (
        "[context: 9,870 of 16,000 tokens used (62%); since your last turn: 2 older tool outputs replaced by a ref, "
        "each keeps its ref; 41 earlier messages summarized]")


def test_off_by_default_and_never_in_the_history() -> None:
    cm = manager()
    cm.add([Message.system("be brief"), Message.user("hi")])
    assert cm.prepare() == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert cm.status_message() is None


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses"])
def test_always_sends_the_line_last_and_keeps_the_cached_prefix(fmt: str) -> None:
    cm = manager(context_status="always")
    cm.add([Message.system("be brief"), Message.user("count the lines"), *turn(1, "12 lines")])
    first = cm.prepare(fmt)
    wire = get_format(fmt)
    view_items = wire.encode(cm.messages())
    assert first[:-1] == view_items  # the system prompt and the history are as they were
    assert first[-1] == wire.encode([Message.user(line(cm.tokens()))])[0]
    assert [m.kind for m in cm.prepare_messages()] == [None, None, None, None]  # not in the history
    cm.add([Message.assistant("12."), Message.user("and now?"), *turn(2, "13 lines")])
    second = cm.prepare(fmt)
    assert second[: len(first) - 1] == first[:-1]  # the earlier request, without its line, is the prefix
    wire.validate(second)


def test_the_line_after_anthropic_tool_results_and_its_tokens_are_counted() -> None:
    on, off = manager(context_status="always"), manager()
    for cm in (on, off):
        cm.add([Message.system("be brief"), Message.user("go"), *turn(1, "done")])
    request = on.prepare("anthropic")
    assert request["system"] == "be brief"
    assert request["messages"][-1] == {"role": "user", "content": line(on.tokens())}
    get_format("anthropic").validate(request["messages"])
    sent = on.status_message()
    assert sent is not None
    reserve = on.steering.status_reserve
    # Decisions count the longest line; what goes out (tokens()) counts the line sent.
    assert reserve >= on.counter.count_message(sent) == on.tokens() - off.tokens() > 0
    assert on._plan()[2] - off._plan()[2] == reserve


def test_changes_mode_speaks_after_masking_until_the_model_has_answered() -> None:
    cm = manager(tools=READ_TOOLS, context_status="changes", clear_at_least=0, keep_tool_io_pairs=1,
                 tool_output_budget_tokens=800)
    cm.add([Message.user("go"), *turn(1, "first output line\n" * 150)])
    cm.prepare()
    assert cm.status_message() is None  # nothing changed yet
    cm.add(turn(2, "second output line\n" * 150))
    request = cm.prepare()
    assert [m.kind for m in cm.messages() if m.role == "tool"] == ["masked", None]
    assert request[-1]["content"].endswith(
        "since your last turn: 1 older tool output replaced by a ref, tool_output_cache reads them back by ref]")
    assert cm.prepare()[-1] == request[-1]  # a retry of the same call says the same
    cm.add([Message.assistant("noted")])
    assert cm.prepare()[-1] == {"role": "assistant", "content": "noted"}  # after its turn; and no prefill note


def test_no_line_after_a_prefill() -> None:
    cm = manager(context_status="always")
    cm.add([Message.user("write a haiku"), Message.assistant("Autumn")])
    assert cm.prepare()[-1] == {"role": "assistant", "content": "Autumn"}


# -- the compaction receipt -------------------------------------------------------------------------------------
def long_session(cm: ContextManager, start: int = 0, turns: int = 24) -> None:
    for i in range(start, start + turns):
        cm.add([Message.user(f"task {i}: check service {i}"), *turn(i, f"service {i} reports code E{4000 + i} " * 30),
                Message.assistant(f"service {i} checked")])


def test_a_compaction_leaves_one_receipt_right_after_the_summary() -> None:
    cm = manager(tools=READ_TOOLS)
    cm.add([Message.system("be brief")])
    long_session(cm)
    report = cm.compact()
    view = cm.messages()
    summary_at = next(i for i, m in enumerate(view) if m.kind == "summary")
    receipt = view[summary_at + 1]
    assert receipt.kind == RECEIPT_KIND and receipt.role == "user"
    covered = view[summary_at].meta["compacted_count"]
    assert covered == report.compacted
    turns = sum(1 for m in cm.archive.transcripts("notes")[0][1] if m.role == "assistant") - sum(  # type: ignore[union-attr]
        1 for m in view if m.role == "assistant")
    assert receipt.text == receipt_text(summarized=covered, turns=turns, tools={"history_search", "tool_output_cache"})
    assert "history_search" in receipt.text
    # The next compaction replaces it: one receipt, after the new summary, counting both compactions.
    long_session(cm, start=24)
    second = cm.compact()
    view = cm.messages()
    receipts = [i for i, m in enumerate(view) if m.kind == RECEIPT_KIND]
    assert len(receipts) == 1 and view[receipts[0] - 1].kind == "summary"
    assert f"{view[receipts[0] - 1].meta['compacted_count']:,} earlier messages" in view[receipts[0]].text
    assert second.compacted > 0
    # The archive gives back the original history: no receipt in it.
    assert cm.archive is not None and cm.cache is not None
    restored = cm.archive.restore_history("notes", cm.messages(), resolve_ref=cm.cache.get)
    assert not any(m.kind == RECEIPT_KIND or "[context note:" in m.text for m in restored)


def test_the_receipt_names_only_the_tools_the_agent_has() -> None:
    cm = manager()  # no tools declared, no adapter offered any
    long_session(cm)
    cm.compact()
    receipt = next(m for m in cm.messages() if m.kind == RECEIPT_KIND)
    assert "history_search" not in receipt.text and "tool_output_cache" not in receipt.text
    assert "their full text is archived outside this conversation" in receipt.text
    cm.steering.offer({"history_search"})  # an adapter gave the agent history_search only
    long_session(cm, start=24)
    cm.compact()
    receipt = next(m for m in cm.messages() if m.kind == RECEIPT_KIND)
    assert "call history_search with a regular expression" in receipt.text
    assert "tool_output_cache" not in receipt.text


def test_receipts_off_and_automatic_compactions_too() -> None:
    off = manager(window=4_000, compaction_receipt=False)
    on = manager(window=4_000)
    for cm in (off, on):
        long_session(cm, turns=40)
        cm.prepare()
        assert cm.compactions >= 1
    assert not any(m.kind == RECEIPT_KIND for m in off.messages())
    assert sum(1 for m in on.messages() if m.kind == RECEIPT_KIND) == 1
    assert on.tokens() <= on.budgets.hard  # the receipt was counted into the compaction's budget


def test_a_compaction_between_calls_is_told_in_the_next_request_even_after_the_models_message() -> None:
    # An adapter feeds the model's compact_context call only after the tool ran the compaction: the next request
    # must still say it, and the one after that no more.
    cm = manager(tools=READ_TOOLS, context_status="changes")
    long_session(cm)
    cm.prepare()
    report = cm.compact()
    cm.add([Message.assistant("", (ToolCall("cc", "compact_context", "{}"),)), Message.tool("cc", "compacted")])
    request = cm.prepare()
    assert request[-1]["content"].endswith(f"since your last turn: {report.compacted} earlier messages summarized, "
                                           "history_search finds their details]")
    cm.add([Message.assistant("carrying on"), Message.user("next?")])
    assert cm.prepare()[-1] == {"role": "user", "content": "next?"}
