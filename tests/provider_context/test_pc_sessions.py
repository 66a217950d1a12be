"""Sixty tool turns on each provider's path with server-side compaction on: every request is one that provider
accepts, and nothing contextfold sends was replaced by a provider compaction item (real SDKs over loopback)."""

from __future__ import annotations

import pytest
from _pc_session import run_session, server

from contextfold import Policy
from contextfold.telemetry import MessagesPruned

TURNS = 60


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_sixty_tool_turns_with_server_side_compaction(provider: str) -> None:
    # Tool uses are kept (keep_tool_io_pairs) so that the provider has to compact, not only clear; outputs of
    # ~2,500 tokens cross the 54,400-token hard threshold of a 64K window about every twenty turns.
    policy = Policy(compactor="provider", keep_tool_io_pairs=60, provider_compaction_instructions="keep the steps")
    with server(context_window=64_000) as llm:
        session = run_session(llm, provider, turns=TURNS, policy=policy, window=64_000, lines=250)
    requests = llm.requests
    assert len(requests) == TURNS
    assert not llm.invalid_requests, llm.invalid_requests[0].invalid  # every request valid (signatures included)
    assert all(r.status == 200 for r in requests)
    records = llm.context_management.compactions
    assert len(records) >= 2
    assert llm.context_management.resent(requests) == []  # nothing a compaction replaced was sent again
    cm = session.cm
    assert cm.compactions == 0 and cm.maskings == 0  # the provider compacted; contextfold only followed
    assert cm.provider_context.totals.compactions == len(records)
    boundaries = [e for e in session.telemetry.events if isinstance(e, MessagesPruned)
                  and "provider_compaction" in e.kept]
    assert len(boundaries) == len(records)
    # The request after each compaction opens with the item, and is smaller than the one it answered.
    for record in records:
        after = requests[record.request]
        assert after.input_tokens < record.tokens_before // 2
