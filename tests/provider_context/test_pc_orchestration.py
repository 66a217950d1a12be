"""Who compacts: contextfold (the default), the provider, or both — through the client wrappers and the scripted
server (real SDKs over loopback HTTP)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import openai
import pytest
from _pc_session import OPENAI_MODEL, run_session, server

from contextfold import ContextManager, Policy
from contextfold.compaction import Budgets
from contextfold.integrations.openai_client import wrap_openai
from contextfold.provider_context import anthropic_settings, openai_settings
from contextfold.telemetry import CompactWarning, ProviderContextReport, RecordingTelemetry, TriggerDecision


def test_request_settings_are_sized_from_the_policy() -> None:
    policy = Policy(keep_tool_io_pairs=5, clear_at_least=3_000, exclude_tools=("read_file",), clear_tool_inputs=True,
                    keep_thinking_turns=2, provider_compaction_instructions="keep file names",
                    provider_pause_after_compaction=True)
    budgets = policy.budgets(200_000)
    settings = anthropic_settings(policy, budgets, thinking=True)
    assert settings.params == {"context_management": {"edits": [
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": budgets.soft},
         "keep": {"type": "tool_uses", "value": 5}, "clear_at_least": {"type": "input_tokens", "value": 3_000},
         "exclude_tools": ["TodoWrite", "manage_todo_list", "read_file", "todo_write", "update_plan"],
         "clear_tool_inputs": True},
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": budgets.hard},
         "instructions": "keep file names", "pause_after_compaction": True},
    ]}}
    assert settings.betas == ("context-management-2025-06-27", "compact-2026-01-12") and settings.compacts
    assert openai_settings(policy, budgets).params == {
        "context_management": [{"type": "compaction", "compact_threshold": budgets.hard}]}
    # Under Anthropic's 50,000-token compaction floor the provider only clears; no thinking, no clear_thinking.
    small = anthropic_settings(Policy(), Policy().budgets(32_000))
    assert [e["type"] for e in small.params["context_management"]["edits"]] == ["clear_tool_uses_20250919"]
    assert small.betas == ("context-management-2025-06-27",) and not small.compacts


def test_a_callers_own_context_management_wins_and_betas_merge() -> None:
    settings = anthropic_settings(Policy(), Policy().budgets(200_000))
    mine = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    applied = settings.apply({"context_management": mine, "betas": ["files-api-2025-04-14"]})
    assert applied["context_management"] is mine
    assert applied["betas"] == ["files-api-2025-04-14", "context-management-2025-06-27", "compact-2026-01-12"]


def _settings_sent(body: Mapping[str, Any]) -> Any:
    return body.get("context_management")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_contextfold_mode_asks_nothing_of_the_provider(provider: str) -> None:
    with server() as llm:
        session = run_session(llm, provider, turns=6, lines=20)
    assert all(_settings_sent(r.body) is None for r in llm.requests)
    assert all("anthropic-beta" not in r.headers for r in llm.requests)
    assert not [e for e in session.telemetry.events if isinstance(e, ProviderContextReport)]


def test_provider_mode_leaves_clearing_to_the_provider_and_reads_what_it_cleared() -> None:
    policy = Policy(compactor="provider")
    with server() as llm:
        session = run_session(llm, "anthropic", turns=16, policy=policy, lines=250)
    assert not llm.invalid_requests, llm.invalid_requests[0].invalid
    cm = session.cm
    assert cm.maskings == 0 and cm.compactions == 0  # contextfold would have masked at soft; the provider did
    totals = cm.provider_context.totals
    cleared = sum(e["cleared_tool_uses"] for r in llm.requests
                  for e in r.response.get("context_management", {}).get("applied_edits", []))
    assert totals.cleared_tool_uses == cleared > 0
    assert totals.replies == len(llm.requests)
    assert all(r.input_tokens <= cm.budgets.hard for r in llm.requests)  # the provider kept it under hard
    sent = {str(_settings_sent(r.body)) for r in llm.requests}
    assert len(sent) == 1 and "clear_thinking_20251015" in next(iter(sent))


def test_contextfold_alone_masks_the_same_session() -> None:
    # Under hard, the cache-aware policy (issue 25) lets a masking wait while what it frees does not pay for the
    # cached prefix it invalidates, which at Anthropic's prices it does not here: off, to compare the ladders.
    with server() as llm:
        session = run_session(llm, "anthropic", turns=16, lines=250, policy=Policy(cache_aware=False))
    assert session.cm.maskings > 0


def test_both_falls_back_to_contextfold_where_the_provider_cannot_compact() -> None:
    # At 40K the hard threshold (34,000) is under Anthropic's 50,000-token floor: the provider only clears, and
    # keeping 14 tool uses of ~2,500 tokens its clearing cannot bring the view under hard.
    policy = Policy(compactor="both", keep_tool_io_pairs=14)
    with server() as llm:
        session = run_session(llm, "anthropic", turns=18, policy=policy, window=40_000, lines=250)
    assert not llm.invalid_requests, llm.invalid_requests[0].invalid
    cm = session.cm
    # contextfold's ladder (masking, then compaction) ran as the fallback, only over hard: under it, the provider's
    # clearing was the one that acted.
    assert cm.compactions + cm.maskings > 0
    decisions = [e for e in session.telemetry.events if isinstance(e, TriggerDecision) and e.triggered]
    assert decisions and all(e.tokens > cm.budgets.hard for e in decisions)
    assert all("compact_20260112" not in str(_settings_sent(r.body)) for r in llm.requests)
    assert all(r.input_tokens <= 40_000 for r in llm.requests)


def test_both_lets_the_provider_compact_first_where_it_can() -> None:
    policy = Policy(compactor="both", keep_tool_io_pairs=40)
    with server() as llm:
        session = run_session(llm, "openai", turns=24, policy=policy, lines=250)
    assert not llm.invalid_requests, llm.invalid_requests[0].invalid
    assert llm.context_management.compactions and session.cm.compactions == 0 and session.cm.maskings == 0
    assert session.cm.provider_context.totals.compactions == len(llm.context_management.compactions)


def test_a_provider_that_refuses_the_settings_leaves_contextfold_in_charge() -> None:
    def old_api(api: str, body: Mapping[str, Any]) -> None:
        if "context_management" in body:
            raise ValueError("Unknown parameter: 'context_management'.")

    with server(validator=old_api) as llm:
        session = run_session(llm, "openai", turns=3, policy=Policy(compactor="provider"), lines=20)
    assert [r.status for r in llm.requests] == [400, 200, 200, 200]
    assert "openai_responses" in session.cm.provider_context.refused
    warnings = [e for e in session.telemetry.events if isinstance(e, CompactWarning) and e.code == "provider_context"]
    assert len(warnings) == 1 and "refused" in warnings[0].message


def test_chat_completions_calls_stay_contextfolds_whatever_the_mode() -> None:
    telemetry = RecordingTelemetry()
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", telemetry=telemetry,
                        policy=Policy(compactor="provider"))
    cm.add({"role": "user", "content": "hi"})
    with server(handler=None, default="hello") as llm:
        wrap_openai(openai.OpenAI(base_url=llm.base_url, api_key="test", max_retries=0)).chat(cm, model=OPENAI_MODEL)
    assert cm.provider_context.engaged is None and "context_management" not in llm.requests[0].body
    assert [e.code for e in telemetry.events if isinstance(e, CompactWarning)] == ["provider_context"]


def test_gate_keeps_contextfold_in_charge_when_the_provider_is_not_asked() -> None:
    from contextfold.compaction import Action, Plan
    from contextfold.provider_context import ProviderContext
    from contextfold.telemetry import Tracer

    policy = Policy(compactor="both")
    budgets: Budgets = policy.budgets(200_000)
    context = ProviderContext(policy, budgets, Tracer(RecordingTelemetry()), "s")
    soft = Plan(Action.SOFT, "over soft")
    assert context.gate(soft, 130_000).action is Action.SOFT  # nobody asked the provider for this call
    context.settings("anthropic")
    assert context.gate(soft, 130_000).action is Action.NONE
    hard = Plan(Action.HARD, "over hard")
    assert context.gate(hard, budgets.hard + 1).action is Action.NONE  # the provider compacts at hard
    assert context.gate(hard, budgets.window).action is Action.HARD  # but not a request it would refuse
