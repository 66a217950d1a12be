"""Histories holding the providers' opaque items, in each format's own wire shape (as the SDKs dump them)."""

from __future__ import annotations

import base64
import json
from typing import Any

# A base64 blob that decodes to text holding an AWS key: a redactor that searched it would change it.
SECRETISH_BLOB = base64.b64encode(b'{"summary": "aws key AKIAIOSFODNN7EXAMPLE used in deploy.sh"}').decode()
SECRET_TEXT = "the key is AKIAIOSFODNN7EXAMPLE"


def responses_history() -> list[dict[str, Any]]:
    """Responses input items: a compaction item, then a turn with encrypted reasoning and a call."""
    return [
        {"type": "message", "role": "developer", "content": "You are a build agent."},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": SECRETISH_BLOB},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run the tests"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": SECRET_TEXT}],
         "encrypted_content": "gAAAAB" + SECRETISH_BLOB},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "bash",
         "arguments": '{"cmd": "pytest -q"}', "status": "completed"},
        {"type": "function_call_output", "call_id": "call_1", "output": "3 passed"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAAB2" + SECRETISH_BLOB},
        {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "All green.", "annotations": []}]},
    ]


def anthropic_history() -> list[dict[str, Any]]:
    """Anthropic messages: a compaction block (with cache_control) heading a turn with signed thinking and a call."""
    return [
        {"role": "assistant", "content": [
            {"type": "compaction", "content": "Summary: the agent fixed the parser; tests pending.",
             "encrypted_content": SECRETISH_BLOB, "cache_control": {"type": "ephemeral"}},
            {"type": "thinking", "thinking": f"I should rerun the tests; {SECRET_TEXT}", "signature": "sig-A1"},
            {"type": "text", "text": "Running the tests."},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "pytest -q"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 passed"}]},
        {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "EqQBCgIYAh" + SECRETISH_BLOB},
            {"type": "thinking", "thinking": "All green.", "signature": "sig-A2"},
            {"type": "text", "text": "All tests pass."},
        ]},
        {"role": "user", "content": "thanks, now the docs"},
    ]


def gemini_history() -> list[dict[str, Any]]:
    """Gemini contents: a thought with its signature before a function call, and its response."""
    return [
        {"role": "user", "parts": [{"text": "run the tests"}]},
        {"role": "model", "parts": [
            {"text": f"plan: {SECRET_TEXT}", "thought": True, "thoughtSignature": "c2lnLUcx"},
            {"functionCall": {"name": "bash", "args": {"cmd": "pytest -q"}}},
        ]},
        {"role": "user", "parts": [{"functionResponse": {"name": "bash", "response": {"output": "3 passed"}}}]},
    ]


def dumps(value: Any) -> str:
    """Canonical JSON, for byte-for-byte comparisons."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
