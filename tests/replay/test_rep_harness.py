"""Replaying real recorded sessions: every turn measured, views valid, figures consistent with each other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TRAJECTORIES, require
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.errors import UnknownModel
from contextfold.formats import get_format
from contextfold.importers._files import load_session, load_sessions
from contextfold.importers._session import RecordedSession
from contextfold.messages import Message, ToolCall
from contextfold.replay.harness import ReplayOptions, SessionReplayer, dump_path, manager_session_id, replay_session

CLAUDE = TRAJECTORIES / "sweagent-claude4sonnet" / "sympy__sympy-19954.traj"
TAU = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"


@pytest.fixture(scope="module")
def claude_session() -> RecordedSession:
    require(CLAUDE.is_file(), f"shared data not found: {CLAUDE}")
    return load_session(CLAUDE)


@pytest.fixture(scope="module")
def claude_result(claude_session: RecordedSession) -> dict[str, object]:
    return replay_session(claude_session, ReplayOptions(window=16_000))


def test_every_assistant_turn_is_measured_once(claude_session: RecordedSession, claude_result: dict) -> None:
    expected = [i for i, m in enumerate(claude_session.messages) if m.role == "assistant"]
    assert [t["turn"] for t in claude_result["series"]] == expected
    assert claude_result["totals"]["turns"] == len(expected)


def test_views_are_valid_and_fit_the_window(claude_result: dict) -> None:
    series = claude_result["series"]
    assert all(t["valid"] and t["error"] is None for t in series)
    window = claude_result["thresholds"]["window"]
    assert window == 16_000
    assert all(0 < t["view_tokens"] <= window for t in series)
    # The raw history outgrows the window, so contextfold had to act.
    assert max(t["raw_tokens"] for t in series) > window
    assert claude_result["totals"]["compactions"] + claude_result["totals"]["maskings"] >= 1
    assert len(claude_result["summaries"]) == claude_result["totals"]["compactions"]
    created = [e for e in claude_result["events"] if e["name"] == "compact.summary_created"]
    assert len(created) == claude_result["totals"]["compactions"]


def test_token_and_cost_series_are_consistent(claude_result: dict) -> None:
    series = claude_result["series"]
    raw = [t["raw_tokens"] for t in series]
    assert raw == sorted(raw)  # the raw history only grows
    assert series[-1]["tokens_sent"] == sum(t["view_tokens"] for t in series)
    assert series[-1]["tokens_sent_baseline"] == sum(raw)
    for t in series:
        assert t["view_tokens"] <= t["raw_tokens"] + 200  # placeholders and summaries cost a little
        assert 0 <= t["cached_tokens"] <= t["view_tokens"]
        assert t["cost_usd_cached"] <= t["cost_usd"] + 1e-12
        assert 0 <= t["in_view"] <= t["recoverable"] <= t["needed"]
        assert t["compacted_recoverable"] <= t["compacted_needed"] <= t["needed"]
    totals = claude_result["totals"]
    assert totals["tokens_sent"] < totals["tokens_sent_baseline"]
    assert totals["cost_usd_cached"] < totals["cost_usd"] < totals["cost_usd_baseline"]
    # Appending turns keeps the prefix: most calls hit the prompt cache.
    assert sum(1 for t in series if t["cached_tokens"]) > len(series) // 2
    # Every token of the view and of the unmanaged history is billed once at each reference provider.
    for t in series:
        for provider in ("openai", "anthropic"):
            view, raw = t["bill"][provider], t["bill_unmanaged"][provider]
            assert view["read"] + view["write"] + view["fresh"] == t["view_tokens"]
            assert raw["read"] + raw["write"] + raw["fresh"] == t["raw_tokens"]
        assert t["bill"]["openai"]["write"] == 0  # OpenAI charges no write
    # The unmanaged history only grows: at Anthropic all of it but the newest messages is read from the cache.
    unmanaged = totals["bill_unmanaged"]["anthropic"]
    assert unmanaged["cache_read"] > 0.8 * unmanaged["tokens"]
    assert totals["cost_usd_baseline_cached"] < totals["cost_usd_baseline"]
    json.dumps(claude_result)


def test_dumped_views_are_what_was_sent(tmp_path: Path, claude_session: RecordedSession) -> None:
    replayer = SessionReplayer(claude_session, ReplayOptions(window=16_000, dump_views=str(tmp_path)))
    result = replayer.run()
    wire = get_format("openai_chat")
    for t in result["series"]:
        path = tmp_path / claude_session.id / f"{t['turn']}.jsonl"
        items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert len(items) == t["view_messages"]
        wire.validate(items)
    # The last dump decodes to the manager's view before the final answer was added.
    last = result["series"][-1]["turn"]
    items = [json.loads(x) for x in (tmp_path / claude_session.id / f"{last}.jsonl").read_text().splitlines()]
    view = replayer.manager.messages()
    assert [m.text for m in wire.decode(items)] == [m.text for m in view[: len(items)]]


def test_dump_paths_nest_and_never_escape(tmp_path: Path) -> None:
    assert dump_path(tmp_path, "gpt-4o-airline/12-0", 7) == tmp_path / "gpt-4o-airline" / "12-0" / "7.jsonl"
    escaped = dump_path(tmp_path, "../../etc/x y", 1)
    assert escaped == tmp_path / "_.." / "_.." / "etc" / "_x_20y" / "1.jsonl"  # (named as the archive names them)
    assert manager_session_id("gpt-4o-airline/12-0") == "gpt-4o-airline/12-0"  # (stored encoded by the archive)


def _tool_session(marker_line: int) -> RecordedSession:
    """A session whose second turn names an identifier that is only in the middle of a huge tool output."""
    lines = [f"line {i}: value_{i % 7} = compute(x)" for i in range(4000)]
    lines[marker_line] = "found hidden_config_loader here"
    call = ToolCall("call_1", "bash", json.dumps({"command": "cat /testbed/big_module.py"}))
    messages = [
        Message.system("You are a coding agent."),
        Message.user("Find where the config is loaded in /testbed/big_module.py"),
        Message.assistant("Reading /testbed/big_module.py", [call]),
        Message.tool("call_1", "\n".join(lines), name="bash"),
        Message.assistant("The loader is `hidden_config_loader` in /testbed/big_module.py"),
    ]
    return RecordedSession("synthetic", "jsonl", messages)


def test_recall_counts_what_is_only_retrievable_by_ref() -> None:
    # The answered output would be shown whole to its own call (contextfold.answered_view): widening off here.
    result = replay_session(_tool_session(marker_line=2000), ReplayOptions(policy={"answered_output_tokens": 0}))
    last = result["series"][-1]
    # The path is in the view; the identifier was cut out of the view at write time but is in the cached output.
    assert last["needed"] == 2
    assert last["in_view"] == 1
    assert last["recoverable"] == 2
    assert last["missing"] == []
    assert any(e["name"] == "cache.truncated" for e in result["events"])


def test_recall_sees_what_stays_in_view() -> None:
    result = replay_session(_tool_session(marker_line=1), ReplayOptions())
    last = result["series"][-1]
    assert (last["needed"], last["in_view"], last["recoverable"]) == (2, 2, 2)


def test_tau_bench_policy_and_user_messages_stay_in_view_at_4000_tokens() -> None:
    require(TAU.is_file(), f"shared data not found: {TAU}")
    sessions = load_sessions(TAU)[:4]
    results = [replay_session(s, ReplayOptions(window=4_000)) for s in sessions]
    assert sum(r["totals"]["compactions"] for r in results) > 0
    for r in results:
        t = r["totals"]
        assert t["valid_rate"] == 1.0
        assert t["policy_turns"] == t["turns"] and t["policy_in_view_turns"] == t["turns"]
        assert t["user_messages"] > 0 and t["user_messages_in_view"] == t["user_messages"]


def test_an_unknown_model_is_named_before_anything_runs(claude_session: RecordedSession) -> None:
    with pytest.raises(UnknownModel, match="no-such-model"):
        SessionReplayer(claude_session, ReplayOptions(model="no-such-model"))


def test_the_manager_sees_the_replays_call_interval(claude_session: RecordedSession) -> None:
    """The replay bills calls ``call_interval_s`` apart, and the manager's cache decisions see the same spacing (its
    clock is the replay's). 30 s apart, the soft compaction of turn 48 waits at Claude's prices (it would not pay for
    the cache it invalidates); 10 minutes apart, every call finds the provider's 5-minute cache dropped, so nothing
    waits: rewrites cost no cache, and masking keeps the view under soft (issue 25)."""
    from dataclasses import replace

    head = replace(claude_session, messages=claude_session.messages[:50])

    def decided(interval: float) -> list[tuple[int, str, bool, str]]:
        result = replay_session(head, ReplayOptions(window=16_000, policy={"cache_pricing": "claude-sonnet-4",
                                                                           "mask_digest": "full"},  # (its placeholders)
                                                    call_interval_s=interval))
        return [(e["turn"], e["data"]["action"], e["data"]["applied"], e["data"]["reason"])
                for e in result["events"] if e["name"] == "compact.cache_decision"]

    warm, idle = decided(30.0), decided(600.0)
    assert [d[:3] for d in warm] == [(34, "mask", True), (48, "soft", False)]
    assert not any("expired" in d[3] for d in warm)
    assert [d[:3] for d in idle] == [(34, "mask", True), (40, "mask", True)]
    assert all("the cache expired (idle 600 s, lifetime 300 s)" in d[3] for d in idle)


def test_dump_paths_of_ids_differing_in_unsafe_characters_differ(tmp_path: Path) -> None:
    # (s20g: "f 1-0" and "f_1-0" both f_1-0/, "a//b" and "a/_/b" both a/_/b/: one session's views over the other's)
    assert dump_path(tmp_path, "f 1-0", 1) != dump_path(tmp_path, "f_1-0", 1)
    assert dump_path(tmp_path, "a//b", 1) != dump_path(tmp_path, "a/_/b", 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab_ ./-~\x00é"), max_size=8), min_size=2, max_size=2,
                unique=True))
def test_dump_paths_are_distinct_per_id_and_stay_under_the_root(ids: list[str]) -> None:
    root = Path("/dumps")
    first, second = (dump_path(root, session_id, 3) for session_id in ids)
    assert first != second
    for path in (first, second):
        assert not {".", ".."} & set(path.relative_to(root).parts)

