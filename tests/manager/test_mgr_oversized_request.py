"""A user request larger than the window (issue 21 §4): kept cut with its head, tail and ref, or a clear error.

Before, a 42 KB paste at an 8K window left the view without a word: the model was sent the system prompt and a
summary of the two messages before it, and answered that.
"""

from __future__ import annotations

import json

import pytest

from contextfold.errors import InsufficientBudget
from contextfold.manager import ContextManager
from contextfold.telemetry import CompactWarning, RecordingTelemetry

LOG = "\n".join(f"log line {i}: value={i * 7} status=ok component=worker-{i % 13}" for i in range(800))
REQUEST = f"Please analyse this log:\n{LOG}\nWhat failed at the end?"


def opening() -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}]


def test_an_oversized_latest_request_stays_in_the_view_cut_with_head_tail_and_ref() -> None:
    assert len(REQUEST.encode()) > 42_000
    telemetry = RecordingTelemetry()
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory", telemetry=telemetry)
    cm.add([*opening(), {"role": "user", "content": REQUEST}])
    request = cm.prepare()
    assert cm.tokens() <= cm.budgets.hard
    last = request[-1]
    assert last["role"] == "user"
    text = last["content"]
    assert text.startswith("Please analyse this log:\nlog line 0: value=0 status=ok")
    assert "log line 799: value=5593 status=ok component=worker-6\nWhat failed at the end?" in text
    ref = cm.messages()[-1].meta["ref"]
    assert f'[your message cached as ref={ref}: 802 lines, {len(REQUEST.encode()):,} bytes in full.' in text
    assert cm.cache is not None and cm.cache.get(str(ref)) == REQUEST  # every byte readable by the agent's tools
    # It was said, not silent.
    assert any(e.code == "answered_recut" and "the user's request" in e.message
               for e in telemetry.events if isinstance(e, CompactWarning))
    # And the archive gives the request back whole.
    assert cm.archive is not None
    restored = cm.archive.restore_history(cm.session_id, cm.messages(), resolve_ref=cm.cache.get)
    assert restored[-1].text == REQUEST
    cm.close()


def test_without_a_tool_output_cache_it_is_a_clear_error_not_a_silent_drop() -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store=None, archive="memory")
    cm.add([*opening(), {"role": "user", "content": REQUEST}])
    with pytest.raises(InsufficientBudget, match=r"the user message being answered \(message 3\) takes [\d,]+ "
                                                 r"tokens.*give the manager a tool output cache"):
        cm.prepare()
    assert json.dumps(cm.messages()[-1].text) == json.dumps(REQUEST)  # the view is as it was
    cm.close()


def test_a_request_of_a_role_the_policy_never_prunes_is_never_cut() -> None:
    # Found by the property test (a 1,700-character user message at a 2,000-token window with roles_never_prune
    # including "user"): the answered request was cut to head, tail and ref although the policy pins user messages.
    from contextfold.compaction import Policy

    policy = Policy(roles_never_prune=("system", "developer", "user"), trigger_pct=0.5, soft_pct=0.3,
                    hard_cap_buffer=0, keep_recent_turns=0, summary_max_tokens=100)
    request = " ".join(f"step {i} of the plan" for i in range(110))
    cm = ContextManager("gpt-4o", max_context_tokens=2_000, policy=policy, store="memory", archive="memory")
    cm.add([{"role": "user", "content": "fix"}, {"role": "assistant", "content": "fix"},
            {"role": "user", "content": request}])
    view = cm.prepare_messages()
    assert view[-1].text == request and "ref" not in view[-1].meta
    cm.close()
