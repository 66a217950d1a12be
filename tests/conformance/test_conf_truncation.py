"""Write-time truncation is configurable on the manager's path (000 §Configuration, §Decision 3; 001 §1.3)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contextfold.cache import CacheConfig
from contextfold.errors import ConfigError
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.tokens import counter_for_model

COUNTER = counter_for_model("gpt-4o").counter
LINES = 20_000
# 20,000 numbered lines of about 14 bytes: ~270 KB, far over every cap.
OUTPUT = "".join(f"line {i:05d} ok\n" for i in range(1, LINES + 1))
MARKER = re.compile(r"\[\.\.\. lines (\d+)-(\d+) of (\d+) omitted; read them with "
                    r'tool_output_cache\(ref_id="(tout_[0-9a-f]{16})", offset=\d+\) …(~?[\d,]+) (tokens|chars) '
                    r"truncated… \.\.\.\]")


def _view(**options: object) -> tuple[str, ContextManager]:
    cm = ContextManager("gpt-4o", store="memory", archive="memory", **options)  # type: ignore[arg-type]
    cm.add([Message.user("run it"), Message.assistant("", (ToolCall("c1", "bash", '{"cmd": "run"}'),)),
            Message.tool("c1", OUTPUT, name="bash")])
    return cm.messages()[-1].text, cm


def _omitted_lines(view: str) -> str:
    match = MARKER.search(view)
    assert match is not None, view[-600:]
    first, last = int(match.group(1)), int(match.group(2))
    return "\n".join(OUTPUT.split("\n")[first - 1:last])


def test_default_view_applies_the_serialization_buffer_and_states_the_tokens_cut() -> None:
    view, cm = _view()
    try:
        cap = CacheConfig().budget_tokens(128_000) // 4  # 8,000 at a 128K window
        assert cm.cache.config.message_tokens(128_000) == int(cap / 1.2) == 6_666
        assert COUNTER.count(view) <= 6_666
        match = MARKER.search(view)
        assert match is not None and match.group(6) == "tokens"
        assert int(match.group(5).replace(",", "")) == COUNTER.count(_omitted_lines(view))
        assert not view.startswith("Total output lines:")
    finally:
        cm.close()


def test_the_documents_5000_token_cap_from_python_yaml_and_environment(tmp_path: Path) -> None:
    view, cm = _view(tool_output={"max_message_tokens": 5_000})
    cm.close()
    assert 4_000 < COUNTER.count(view) <= 4_166  # 5,000 / 1.2
    config = tmp_path / "c.yaml"
    config.write_text("tool_output:\n  max_tokens: 5000\n  header: true\n")
    for cm in (ContextManager.from_config(str(config), env={}, store="memory", archive="memory"),
               ContextManager.from_config(env={"CONTEXTFOLD_TOOL_OUTPUT__MAX_TOKENS": "5000",
                                               "CONTEXTFOLD_TOOL_OUTPUT__HEADER": "true"},
                                          store="memory", archive="memory")):
        try:
            assert (cm.cache.config.max_message_tokens, cm.cache.config.header) == (5_000, True)
            assert cm.cache.config.message_tokens(128_000) == 4_166
        finally:
            cm.close()


def test_serialization_buffer_is_configurable() -> None:
    loose, cm = _view(tool_output={"max_message_tokens": 5_000, "serialization_buffer": 1.0})
    cm.close()
    assert 4_166 < COUNTER.count(loose) <= 5_000


def test_header_states_the_total_lines() -> None:
    view, cm = _view(tool_output={"header": True})
    cm.close()
    assert view.startswith(f"Total output lines: {LINES}\nline 00001 ok\n")


def test_byte_unit_cuts_by_bytes_only_and_counts_chars() -> None:
    view, cm = _view(tool_output={"unit": "bytes", "max_message_bytes": 4_096})
    cm.close()
    assert len(view.encode()) <= 4_096
    match = MARKER.search(view)
    assert match is not None and match.group(6) == "chars"
    assert int(match.group(5).replace(",", "")) == len(_omitted_lines(view)) + 1  # each omitted line and its "\n"


def test_byte_unit_has_no_token_cap() -> None:
    config = CacheConfig(unit="bytes")
    assert config.message_tokens(8_000) > 10**15


def test_unit_none_leaves_outputs_whole() -> None:
    view, cm = _view(tool_output={"unit": "none"})
    cm.close()
    assert view == OUTPUT


def test_line_cap_keeps_head_and_tail_lines() -> None:
    view, cm = _view(tool_output={"max_message_lines": 10})
    cm.close()
    content = [line for line in view.split("\n") if line.startswith("line ")]
    assert content == [f"line {i:05d} ok" for i in (1, 2, 3, 4, 5, 19_996, 19_997, 19_998, 19_999, 20_000)]


@pytest.mark.parametrize(("options", "field"), [
    ({"unit": "lines"}, "cache.unit"),
    ({"serialization_buffer": 0.5}, "cache.serialization_buffer"),
    ({"max_message_lines": 0}, "cache.max_message_lines"),
    ({"max_tokens": 5}, "tool_output"),
])
def test_bad_truncation_settings_name_the_field(options: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        ContextManager("gpt-4o", store="memory", archive="memory", tool_output=options)
    assert err.value.field == field


def test_bad_yaml_unit_names_the_path() -> None:
    from contextfold.config import load_settings

    with pytest.raises(ConfigError) as err:
        load_settings(env={"CONTEXTFOLD_TOOL_OUTPUT__UNIT": "lines"})
    assert err.value.field == "tool_output.unit" and "CONTEXTFOLD_TOOL_OUTPUT__UNIT" in str(err.value)
