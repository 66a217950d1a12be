"""Bad input to the API: InvalidHistory naming the index and field, nothing half-added; lone surrogates kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextfold.errors import InvalidHistory
from contextfold.formats._common import MAX_NESTING
from contextfold.manager import CompactionReport, ContextManager


def _manager(tmp_path: Path, **options: Any) -> ContextManager:
    return ContextManager("gpt-4o", store=f"local://{tmp_path}/store", archive=str(tmp_path / "archive"),
                          session_id="bad-input", message_id_prefix="m", **options)


@pytest.mark.parametrize(("value", "problem"), [
    (None, "expected a Message, a dict or a list of them, got NoneType"),
    (5, "expected a Message, a dict or a list of them, got int"),
    ("hello", "expected a Message, a dict or a list of them, got str"),
    (b"hello", "expected a Message, a dict or a list of them, got bytes"),
    ([{"role": "user", "content": "ok"}, None], "expected a Message or a dict, got NoneType"),
    ([{"role": "user", "content": "ok"}, 5], "expected a Message or a dict, got int"),
])
def test_not_a_message_is_invalid_history_and_nothing_is_added(tmp_path: Path, value: Any, problem: str) -> None:
    with _manager(tmp_path) as cm:
        cm.add({"role": "user", "content": "first"})
        with pytest.raises(InvalidHistory) as caught:
            cm.add(value)
        assert caught.value.problem == problem
        assert caught.value.index == (2 if isinstance(value, list) else 1)
        # Atomic: the valid message before the bad one in the same batch was not added either, and no id was used.
        cm.add({"role": "assistant", "content": "second"})
        assert [(m.text, m.meta["id"]) for m in cm.messages()] == [("first", "m:1"), ("second", "m:2")]


def test_deep_nesting_names_the_message_and_the_field(tmp_path: Path) -> None:
    deep: Any = "leaf"
    for _ in range(MAX_NESTING + 5):
        deep = [deep]
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}, "extra": deep}
    with _manager(tmp_path) as cm, pytest.raises(InvalidHistory) as caught:
        cm.add([{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call]}])
    assert caught.value.index == 1
    assert caught.value.field is not None and caught.value.field.startswith("tool_calls[0].extra[0][0]")
    assert f"nested deeper than {MAX_NESTING} levels" in str(caught.value)


def test_a_lone_surrogate_is_stored_and_restored_losslessly(tmp_path: Path) -> None:
    big = "line \ud800 of binary-ish output\n" * 4000  # cut to a view; the whole text goes to the local store
    history = [
        {"role": "user", "content": "read it \udc00"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": '{"path": "\\ud800"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": big},
    ]
    with _manager(tmp_path, max_context_tokens=8_000) as cm:
        cm.add(history)
        sent = cm.prepare()
        assert sent[0] == {"role": "user", "content": "read it \udc00"}
        assert json.loads(json.dumps(sent)) == sent  # sendable: the SDK's JSON encoder escapes it
        for i in range(12):  # enough turns to compact, archive and summarize text holding surrogates
            cm.add([{"role": "user", "content": f"question {i} \udfff " + "word " * 150},
                    {"role": "assistant", "content": f"answer {i} \ud801 " + "word " * 150}])
            cm.prepare()
        assert cm.status().compactions >= 1
        assert cm.archive is not None and cm.cache is not None
        restored = cm.archive.restore_history("bad-input", cm.messages(), resolve_ref=cm.cache.get)
    assert restored[0].content == "read it \udc00"
    assert restored[1].tool_calls[0].arguments == '{"path": "\\ud800"}'
    assert restored[2].content == big
    assert restored[3].content.startswith("question 0 \udfff")
    assert len(restored) == 3 + 24


def test_a_compaction_that_grows_the_view_says_plus() -> None:
    assert "26 → 26 tokens (-0%)" in CompactionReport.unchanged(tokens=26, messages=3).line()
    grown = CompactionReport(compacted=1, tokens_before=26, tokens_after=54, messages_before=3, messages_after=3,
                             duration_ms=1.0)
    assert "26 → 54 tokens (+108%)" in grown.line()
    assert "--" not in grown.line()
