"""The wrapped client hands back a reply holding a retrieval call and the agent's custom tool call."""

from __future__ import annotations

from contextfold.integrations._calls import retrieval_results
from contextfold.integrations._retrieval import TOOL_NAMES
from contextfold.manager import ContextManager


def test_a_reply_with_a_custom_call_is_not_answered_internally() -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=200_000, store="memory", archive=False)
    cm.add([{"type": "message", "role": "user", "content": "go"}], format="openai_responses")
    grep = {"type": "function_call", "call_id": "r1", "name": TOOL_NAMES[1],
            "arguments": '{"ref":"tout_x","pattern":"a"}'}
    patch = {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"}
    assert retrieval_results(cm, [grep, patch], "openai_responses") is None
    assert retrieval_results(cm, [grep], "openai_responses") is not None  # the retrieval call alone is answered
