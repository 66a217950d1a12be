"""ContextManager: the flow of a turn, on hand-made and real sessions."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from conftest import TRAJECTORIES, require
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.archive import Archive
from contextfold.compaction import Policy
from contextfold.errors import ConfigError, InsufficientBudget, InvalidHistory
from contextfold.formats import FORMATS, get_format
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.pairing import normalize
from contextfold.stores.archive_fs import FilesystemArchiveStore
from contextfold.telemetry import CompactWarning, RecordingTelemetry


def manager(tmp_path: Path, window: int = 16_000, **kw: object) -> ContextManager:
    kw.setdefault("telemetry", RecordingTelemetry())
    return ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive=str(tmp_path / "archive"),
                          session_id="s1", **kw)  # type: ignore[arg-type]


def turn(i: int, output: str = "ok") -> list[Message]:
    call = ToolCall(f"call_{i}", "bash", json.dumps({"cmd": f"cat file_{i}.py"}))
    return [Message.assistant(f"step {i}", [call]), Message.tool(call.id, output, name="bash")]


def test_prepare_returns_the_history_in_each_format(tmp_path: Path) -> None:
    cm = manager(tmp_path)
    cm.add([Message.system("be brief"), Message.user("fix the bug"), *turn(1), Message.assistant("done")])
    for name in FORMATS:
        view = cm.prepare(format=name)
        wire = get_format(name)
        items = view if isinstance(view, list) else wire.encode(cm.messages())
        wire.validate(items)
    assert cm.prepare("openai_chat")[1] == {"role": "user", "content": "fix the bug"}


def test_dicts_and_sdk_shapes_are_accepted(tmp_path: Path) -> None:
    cm = manager(tmp_path)
    cm.add({"role": "user", "content": "hi"})
    cm.add([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"}])
    assert [m.role for m in cm.messages()] == ["user", "assistant", "tool"]


def test_bad_input_names_the_index_in_the_whole_history(tmp_path: Path) -> None:
    cm = manager(tmp_path)
    cm.add([Message.user("a"), Message.user("b")])
    with pytest.raises(InvalidHistory) as info:
        cm.add([Message.user("c"), Message("tool", "x")])
    assert info.value.index == 3 and info.value.field == "tool_call_id"
    assert len(cm.messages()) == 2  # nothing of the bad batch got in


def test_unanswered_call_gets_aborted_output_only_in_the_view(tmp_path: Path) -> None:
    cm = manager(tmp_path)
    call = ToolCall("c1", "bash", "{}")
    cm.add([Message.user("go"), Message.assistant("", [call])])
    view = cm.prepare()
    assert view[-1]["role"] == "tool" and "aborted" in view[-1]["content"]
    cm.add(Message.tool("c1", "real output"))
    assert cm.prepare()[-1]["content"] == "real output"


def test_huge_tool_output_is_cached_at_write_time(tmp_path: Path) -> None:
    cm = manager(tmp_path)
    big = "\n".join(f"line {i} " + "x" * 80 for i in range(5_000))
    cm.add([Message.user("go"), *turn(1, big)])
    tool = cm.messages()[-1]
    ref = tool.meta["ref"]
    assert len(tool.text) < len(big) and ref in tool.text
    assert cm.cache.get(ref) == big


def test_compaction_keeps_view_under_budget_and_archives(tmp_path: Path) -> None:
    tel = RecordingTelemetry()
    cm = manager(tmp_path, window=8_000, telemetry=tel)
    cm.add([Message.system("you are an agent"), Message.user("fix test_parser.py please")])
    for i in range(150):
        cm.add(turn(i, f"output {i} " + "data " * 120))
        view = cm.prepare()
        get_format("openai_chat").validate(view)
        assert cm.tokens() <= cm.budgets.hard
    # masking (lossless) goes first; summarizing follows once masking alone no longer gets under soft
    assert cm.maskings >= 1 and cm.compactions >= 1
    names = set(tel.names())
    assert {"cache.masked", "compact.summary_created", "compact.pruned_messages",
            "compact.trigger_decision"} <= names
    archive = Archive(FilesystemArchiveStore(tmp_path / "archive"))
    assert archive.transcript_numbers("s1")
    view = cm.messages()
    assert view[0].text == "you are an agent"
    assert any(m.kind == "summary" for m in view)


def test_auto_off_never_compacts(tmp_path: Path) -> None:
    # The 1,500-token reply reserve of the 4K window this test was written for (the default is a fifth of it now).
    cm = manager(tmp_path, window=4_000, policy=Policy(auto=False, reply_reserve_max_pct=1.0))
    cm.add([Message.user("go")])
    for i in range(40):
        cm.add(turn(i, "data " * 100))
        cm.prepare()
    assert cm.compactions == 0
    assert cm.tokens() > cm.budgets.hard


def test_manual_compact_reports_figures(tmp_path: Path) -> None:
    cm = manager(tmp_path)
    cm.add([Message.user("go")])
    for i in range(20):
        cm.add(turn(i, "data " * 50))
    report = cm.compact(instructions="keep the file names")
    assert report.tokens_after < report.tokens_before
    assert report.compacted > 0
    assert "compacted" in report.line()


def test_policy_mapping_errors_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"policy\.trigger_pct"):
        manager(tmp_path, policy={"trigger_pct": 1.5})


def test_usage_grounds_the_estimate(tmp_path: Path) -> None:
    cm = manager(tmp_path)
    cm.add([Message.user("hello there")])
    counted = cm.tokens()
    cm.prepare()
    cm.record_usage({"prompt_tokens": counted + 100, "completion_tokens": 5})
    assert cm.tokens() == counted + 100
    cm.add(Message.assistant("hi"))
    assert cm.tokens() > counted + 100


def test_a_view_the_provider_counts_over_hard_is_never_sent_silently(tmp_path: Path) -> None:
    # Pinned system text our counter puts under hard (728 of 1,000) but the provider, by its last usage, over it.
    # Compaction is measured with our counter: it must aim under hard by the provider's count, and say it cannot.
    policy = {"trigger_pct": 0.5, "soft_pct": 0.3, "hard_cap_buffer": 0, "user_message_budget": 0}
    cm = ContextManager("gpt-4o", max_context_tokens=2_000, store="memory", archive="memory", policy=policy)
    cm.counter.wait_exact()
    cm.add([Message.system("You are a careful agent. " + "Follow the house rules. " * 140), Message.user("Go on.")])
    cm.record_usage({"prompt_tokens": int(cm.tokens() * 1.6), "completion_tokens": 0}, of_current_view=True)
    cm.add([Message.system("Be brief.")])
    counted = cm.counter.count_messages(cm.messages())
    assert counted < cm.budgets.hard < cm.tokens()
    with pytest.raises(InsufficientBudget, match="pinned and protected messages need"):
        cm.prepare()
    assert cm.compactions == 0 and cm.counter.count_messages(cm.messages()) == counted  # the history is intact


def test_a_provider_count_no_compaction_can_meet_is_set_aside_with_a_warning() -> None:
    # A usage report 8x our count of a small, all-recent view: nothing can be compacted to meet it. Keeping the
    # count would refuse every later call of the session; it is set aside, said, and the view goes out as counted.
    tel = RecordingTelemetry()
    policy = {"trigger_pct": 0.5, "soft_pct": 0.3, "hard_cap_buffer": 0}
    cm = ContextManager("gpt-4o", max_context_tokens=2_000, store="memory", archive="memory", policy=policy,
                        telemetry=tel)
    cm.counter.wait_exact()
    cm.add([Message.system("Be brief."), Message.user("Summarize the quarterly report " * 40)])
    counted = cm.tokens()
    cm.record_usage({"prompt_tokens": counted * 8, "completion_tokens": 0}, of_current_view=True)
    assert cm.tokens() == counted * 8 > cm.budgets.hard
    cm.prepare()
    assert cm.tokens() == counted and cm.compactions == 0
    (warning,) = [e for e in tel.events if isinstance(e, CompactWarning) and e.code == "usage_count_dropped"]
    assert f"by {counted * 7:,} tokens" in warning.message
    cm.record_usage({"prompt_tokens": counted + 5, "completion_tokens": 0})  # the next report counts again
    assert cm.tokens() == counted + 5


def test_idle_compaction_applies_when_view_intact(tmp_path: Path) -> None:
    cm = manager(tmp_path, window=6_000)
    cm.add([Message.user("go")])
    for i in range(35):
        cm.add(turn(i, "data " * 60))
    assert cm.tokens() > cm.budgets.soft
    future = cm.compact_in_background()
    assert future is not None
    future.result()
    cm.add(Message.user("and one more thing"))  # appended meanwhile: still applies, tail kept
    cm.prepare()
    assert cm.compactions == 1
    assert cm.messages()[-1].text == "and one more thing"


def test_idle_compaction_dropped_when_view_rewritten(tmp_path: Path) -> None:
    tel = RecordingTelemetry()
    cm = manager(tmp_path, window=6_000, telemetry=tel)
    cm.add([Message.user("go")])
    for i in range(35):
        cm.add(turn(i, "data " * 60))
    future = cm.compact_in_background()
    assert future is not None
    future.result()
    cm.compact()  # rewrites the view before the idle result is applied
    before = cm.compactions
    cm.prepare()
    assert cm.compactions == before
    assert any(e.to_dict()["data"].get("code") == "idle_discarded" for e in tel.events)


def test_threads_adding_concurrently_lose_nothing(tmp_path: Path) -> None:
    cm = manager(tmp_path, window=1_000_000)
    cm.add(Message.user("start"))
    barrier = threading.Barrier(4)

    def worker(k: int) -> None:
        barrier.wait()
        for i in range(50):
            cm.add(Message.user(f"w{k}-{i}"))
            cm.prepare()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    texts = {m.text for m in cm.messages()}
    assert all(f"w{k}-{i}" in texts for k in range(4) for i in range(50))


def test_async_mirror(tmp_path: Path) -> None:
    cm = manager(tmp_path)

    async def run() -> list[dict[str, object]]:
        await cm.aadd([Message.user("hi")])
        return await cm.aprepare("openai_chat")  # type: ignore[no-any-return]

    assert asyncio.run(run()) == [{"role": "user", "content": "hi"}]


@st.composite
def appends(draw: st.DrawFn) -> list[list[Message]]:
    batches: list[list[Message]] = []
    for k in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["user", "turn", "open_call", "text"]))
        if kind == "user":
            batches.append([Message.user(f"u{k}")])
        elif kind == "turn":
            batches.append(turn(k))
        elif kind == "open_call":
            batches.append([Message.assistant("", [ToolCall(f"open_{k}", "f", "{}")])])
        else:
            batches.append([Message.assistant(f"t{k}")])
    return batches


@given(appends(), st.sampled_from(sorted(FORMATS)))
@settings(max_examples=80, deadline=None)
def test_incremental_view_equals_full_normalization(batches: list[list[Message]], fmt: str) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=1_000_000, store="memory", archive=False)
    wire = get_format(fmt)
    added: list[Message] = []
    for batch in batches:
        cm.add(batch)
        added.extend(batch)
        expected = normalize([m for m in cm._view.raw])
        got = cm.messages()
        assert [m.fingerprint() for m in got] == [m.fingerprint() for m in expected]
        if fmt in ("openai_chat", "openai_responses"):
            assert cm.prepare(fmt) == wire.encode(expected)
        assert cm.tokens() == sum(cm.counter.count_message(m) for m in expected)


@pytest.mark.parametrize("folder", ["sweagent-claude4sonnet", "taubench-airline"])
def test_real_sessions_stay_valid_and_under_budget(tmp_path: Path, folder: str) -> None:
    require(TRAJECTORIES.is_dir(), "shared data missing")
    from contextfold.importers._files import load_sessions

    sessions = load_sessions(TRAJECTORIES / folder)[:3]
    for s in sessions:
        cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive=str(tmp_path / "a"),
                            session_id=s.id.replace("/", "_"))
        last = 0
        for i, m in enumerate(s.messages):
            if m.role == "assistant":
                cm.add(s.messages[last:i])
                last = i
                get_format(s.format).validate(cm.prepare(s.format))
                assert cm.tokens() <= cm.budgets.hard


def test_from_config_file_env_and_kwargs(tmp_path: Path) -> None:
    cfg = tmp_path / "cf.yaml"
    cfg.write_text(
        "version: 1\nmodel: gpt-4o\nmax_context_tokens: 50000\npolicy:\n  trigger_pct: 0.7\n"
        f"storage:\n  store: memory\n  archive: {tmp_path / 'arch'}\n"
    )
    cm = ContextManager.from_config(str(cfg), env={"CONTEXTFOLD_TRIGGER_PCT": "0.8"}, max_context_tokens=40_000,
                                    session_id="cfg")
    assert cm.policy.trigger_pct == 0.8
    assert cm.budgets.window == 40_000
    cm.add(Message.user("hello"))
    cm.compact()
    cm.finish()
    assert Archive(FilesystemArchiveStore(tmp_path / "arch")).transcript_numbers("cfg") == [1]


def test_events_reach_the_archive_redacted(tmp_path: Path) -> None:
    cm = manager(tmp_path, window=8_000)
    secret = "sk-proj-" + "A1b2C3d4" * 6
    cm.add([Message.user(f"my key is {secret}, fix test_parser.py")])
    for i in range(40):
        cm.add(turn(i, "data " * 60))
        cm.prepare()
    cm.compact()
    cm.finish()
    archive = Archive(FilesystemArchiveStore(tmp_path / "archive"))
    events = archive.events("s1")
    assert {e["name"] for e in events} >= {"compact.token_estimate", "compact.summary_created"}
    raw = "".join(p.read_text() for p in (tmp_path / "archive").rglob("*") if p.is_file())
    assert secret not in raw
    assert "test_parser.py" in raw


def test_background_checks_compact_off_the_model_call_path(tmp_path: Path) -> None:
    tel = RecordingTelemetry()
    cm = manager(tmp_path, window=6_000, telemetry=tel, background=True)
    cm.tracer.keep_noop_decisions = True  # every check's decision, also those that started nothing
    cm.add([Message.user("go")])
    for i in range(35):
        cm.add(turn(i, "data " * 60))  # each tool result triggers a check
    cm.record_usage({"prompt_tokens": cm.tokens(), "completion_tokens": 3})
    cm.finish()  # waits for the worker and applies its result
    assert cm.compactions >= 1
    reasons = [e.to_dict()["data"]["reason"] for e in tel.events if e.name == "compact.trigger_decision"]
    assert any(r.startswith("after tool execution") for r in reasons)
    assert any(r.startswith("after model call") for r in reasons)
    assert any(r.startswith("before finish") for r in reasons)


def test_token_estimate_breaks_down_by_layer(tmp_path: Path) -> None:
    tel = RecordingTelemetry()
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    cm = manager(tmp_path, telemetry=tel, tools=tools)
    cm.add([Message.system("be brief"), Message("developer", "use tabs"), Message.user("go"), *turn(1)])
    cm.prepare()
    cm.add(Message.assistant("done"))
    cm.prepare()
    data = [e.to_dict()["data"] for e in tel.events if e.name == "compact.token_estimate"][-1]
    count = cm.counter.count_message
    assert data["system"] == count(Message.system("be brief"))
    assert data["developer"] == count(Message("developer", "use tabs"))
    assert data["tools_schema"] == cm.counter.count_tools(tools) > 0
    assert data["system"] + data["developer"] + data["messages"] + data["tools_schema"] == cm.tokens()


def test_trace_events_carry_the_documents_fields_and_name_the_protected_layer(tmp_path: Path) -> None:
    # 004 Appendix: trigger_decision's policy block has trigger_pct, hard_cap_buffer and strategy; a hard decision
    # is taken against the hard threshold; pruned_messages names the pinned and protected messages that stayed.
    telemetry = RecordingTelemetry()
    cm = manager(tmp_path, window=4_000, telemetry=telemetry)
    cm.add([Message.system("You are terse."),
            Message.user("plan: fix the parser", meta={"protected": True, "id": "plan-1", "label": "plan"})])
    cm.add([Message.user(f"request {i} " + "words " * 120) for i in range(30)])
    assert cm.tokens() > cm.budgets.hard
    cm.prepare()
    decisions = [e for e in telemetry.events if e.NAME == "compact.trigger_decision" and e.triggered]
    assert decisions and {"trigger_pct", "hard_cap_buffer", "strategy"} <= set(decisions[0].policy)
    assert decisions[0].policy["strategy"] == "task_state" and decisions[0].policy["hard_cap_buffer"] == 1_500
    hard = [d for d in decisions if d.action in ("hard", "emergency")]
    assert hard and all(d.threshold_tokens == cm.budgets.hard for d in hard)
    pruned = [e for e in telemetry.events if e.NAME == "compact.pruned_messages"]
    assert pruned and "plan-1 (plan)" in pruned[-1].protected
    assert any(name.startswith(cm.messages()[0].meta["id"]) for name in pruned[-1].protected)  # the system prompt
