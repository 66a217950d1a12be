"""Provider items through the manager: byte for byte, counted, never rewritten, a compaction item a boundary."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from _pc_items import SECRET_TEXT, anthropic_history, dumps, gemini_history, responses_history

from contextfold import ContextManager
from contextfold.formats import get_format
from contextfold.messages import Message, ThinkingPart, UnknownPart
from contextfold.redact import Redactor
from contextfold.telemetry import MessagesPruned, ProviderItemDropped, RecordingTelemetry

HISTORIES = {"openai_responses": responses_history, "anthropic": anthropic_history, "gemini": gemini_history}


def _manager(**options: Any) -> ContextManager:
    options.setdefault("telemetry", RecordingTelemetry())
    return ContextManager(model="gpt-4o", store="memory", archive="memory", **options)


def _sent(cm: ContextManager, fmt: str) -> list[dict[str, Any]]:
    prepared = cm.prepare(format=fmt)
    if fmt == "anthropic":
        return list(prepared["messages"])
    if fmt == "gemini":
        return list(prepared["contents"])
    return list(prepared)


@pytest.mark.parametrize("fmt", sorted(HISTORIES))
def test_provider_items_come_back_byte_for_byte_even_with_redaction_of_model_input(fmt: str) -> None:
    history = HISTORIES[fmt]()
    cm = _manager(redact=Redactor(apply_to_model=True))
    cm.add(copy.deepcopy(history), format=fmt)
    sent = _sent(cm, fmt)
    if fmt == "openai_responses":
        assert dumps(sent) == dumps(history)
    else:
        assert dumps(sent) == dumps(history)
    get_format(fmt).validate(sent)


def test_plain_text_with_the_same_secret_is_still_redacted_for_the_model() -> None:
    cm = _manager(redact=Redactor(apply_to_model=True))
    cm.add([{"role": "user", "content": SECRET_TEXT}], format="openai_chat")
    assert "AKIAIOSFODNN7EXAMPLE" not in dumps(cm.prepare(format="openai_chat"))


@pytest.mark.parametrize("fmt", sorted(HISTORIES))
def test_provider_items_are_counted(fmt: str) -> None:
    history = HISTORIES[fmt]()
    cm = _manager()
    cm.add(copy.deepcopy(history), format=fmt)
    with_items = cm.tokens()
    bare = _manager()
    stripped = get_format(fmt).decode(copy.deepcopy(history))
    bare.add([_without_opaque(m) for m in stripped])
    assert with_items > bare.tokens()


def _without_opaque(m: Message) -> Message:
    if isinstance(m.content, str):
        return m
    kept = tuple(p for p in m.content if not isinstance(p, ThinkingPart | UnknownPart))
    return Message(m.role, kept or "", m.tool_calls, m.tool_call_id, m.name)


def test_a_compaction_item_hides_what_it_replaced_and_keeps_the_standing_prompt() -> None:
    telemetry = RecordingTelemetry()
    cm = _manager(telemetry=telemetry)
    before = [
        {"type": "message", "role": "system", "content": "You are a build agent."},
        {"type": "message", "role": "user", "content": "fix the build"},
        {"type": "function_call", "call_id": "c0", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c0", "output": "error: missing semicolon " * 50},
    ]
    cm.add(before, format="openai_responses")
    after = [{"type": "compaction", "id": "cmp_9", "encrypted_content": "ZW5jcnlwdGVk"},
             {"type": "message", "role": "assistant", "content": "Fixed."}]
    cm.add(after, format="openai_responses")
    assert cm.prepare(format="openai_responses") == [before[0], *after]
    pruned = [e for e in telemetry.events if isinstance(e, MessagesPruned)]
    assert [(e.count, dict(e.kept)) for e in pruned] == [(3, {"provider_compaction": 3})]
    # nothing is lost: the archive holds what the provider replaced
    restored = cm.archive.restore_history(cm.session_id, cm.messages())
    assert [m.text for m in restored][:2] == ["You are a build agent.", "fix the build"]


def test_contextfold_never_summarizes_across_a_provider_compaction_item() -> None:
    cm = _manager()
    history = anthropic_history()
    cm.add([{"role": "system", "content": "You are a build agent."}, *copy.deepcopy(history)], format="anthropic")
    for turn in range(12):
        cm.add([{"role": "assistant", "content": [
                    {"type": "text", "text": f"step {turn}"},
                    {"type": "tool_use", "id": f"t{turn}", "name": "bash", "input": {"n": turn}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{turn}",
                                              "content": f"output {turn} " + "x " * 400}]}], format="anthropic")
    report = cm.compact()
    assert report.compacted > 0
    sent = cm.prepare(format="anthropic")
    assert sent["system"] == "You are a build agent."
    # the boundary turn is first and whole (compaction block, signed thinking, its call and result) ...
    assert dumps(sent["messages"][:2]) == dumps(history[:2])
    # ... and contextfold's summary comes after it, never before (a summary there would be ignored)
    kinds = [m.kind for m in cm.messages()]
    assert kinds.index("summary") > kinds.index("provider_compaction")
    get_format("anthropic").validate(sent["messages"])


def test_converting_to_a_provider_that_cannot_read_an_item_drops_it_with_an_event() -> None:
    telemetry = RecordingTelemetry()
    cm = _manager(telemetry=telemetry)
    cm.add([{"role": "system", "content": "You are a build agent."}, *anthropic_history()], format="anthropic")
    for fmt in ("openai_responses", "openai_chat", "gemini"):
        sent = _sent(cm, fmt)
        text = dumps(sent)
        assert "sig-A1" not in text and "compaction" not in text and "EqQBCgIYAh" not in text, fmt
        assert "Running the tests." in text and "3 passed" in text, fmt
        get_format(fmt).validate(sent)
    dropped = [e for e in telemetry.events if isinstance(e, ProviderItemDropped)]
    assert [(e.format, e.count, dict(e.kinds), e.origins) for e in dropped] == [
        (fmt, 4, {"compaction": 1, "thinking": 2, "redacted_thinking": 1}, ("anthropic",))
        for fmt in ("openai_responses", "openai_chat", "gemini")
    ]
    _sent(cm, "openai_chat")  # reported once per message and format
    assert len([e for e in telemetry.events if isinstance(e, ProviderItemDropped)]) == 3
    assert "sig-A1" in dumps(cm.prepare(format="anthropic"))  # still in the history, for its own provider
