"""The design documents' configuration (004 §8) loads as written, and every field is reachable from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.compaction import DEFAULT_PROTECTED_TOOLS, Policy
from contextfold.config import load_settings
from contextfold.errors import ConfigError
from contextfold.manager import ContextManager
from contextfold.messages import Message

# 004_8e3f15ce46c24080.txt §8, byte for byte.
DOCUMENT_YAML = """\
model: "gpt-4"
max_context_tokens: 128000

policy:
  trigger_pct: 0.85
  hard_cap_buffer: 1500
  keep_recent_turns: 6
  keep_tool_io_pairs: 4
  roles_never_prune: ["system", "developer"]
  protected_flag: "protected"
  strategy: "task_state"

telemetry:
  exporter: "ariadne"  # console | ariadne | otlp | custom
  ariadne_url: "http://localhost:5175/ingest"

storage:
  adapter: "fs"  # fs | s3 | custom
  path: "./.compact/archive"

redaction:
  enabled: true
  patterns:
    - "(?i)api[_-]?key\\\\s*[:=]\\\\s*\\\\S+"
    - "(?i)password\\\\s*[:=]\\\\s*\\\\S+"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "compact.yaml"
    path.write_text(text)
    return path


def test_from_config_loads_the_documents_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cm = ContextManager.from_config(str(_write(tmp_path, DOCUMENT_YAML)), env={}, store="memory")
    try:
        assert cm.model.name == "gpt-4" and cm.model.context_window == 128_000
        assert (cm.policy.trigger_pct, cm.policy.hard_cap_buffer, cm.policy.keep_recent_turns,
                cm.policy.keep_tool_io_pairs) == (0.85, 1500, 6, 4)
        assert cm.policy.roles_never_prune == ("system", "developer")
        assert cm.policy.protected_flag == "protected" and cm.policy.strategy == "task_state"
        exporters = [s.exporter for s in cm.tracer.telemetry.sinks if hasattr(s, "exporter")]
        assert [type(e).__name__ for e in exporters] == ["AriadneExporter", "ArchiveEventsExporter"]
        assert exporters[0].url == "http://localhost:5175/ingest"
        assert Path(cm.archive.store.root).resolve() == (tmp_path / ".compact" / "archive").resolve()
        redacted = cm.redactor.redact_text("api_key = sk-live-123 and password: hunter2 stay private")
        assert "sk-live-123" not in redacted and "hunter2" not in redacted
        assert "[REDACTED:pattern_1]" in redacted and "[REDACTED:pattern_2]" in redacted
    finally:
        cm.close()


def test_one_exporter_name_and_the_documents_aliases() -> None:
    s = load_settings(env={}, telemetry={"exporter": "otlp"})
    assert s.telemetry.exporters == ("otel",)
    assert load_settings(env={}, telemetry={"exporter": "none"}).telemetry.exporters == ()
    with pytest.raises(ConfigError, match="ContextManager\\(telemetry=") as err:
        load_settings(env={}, telemetry={"exporter": "custom"})
    assert err.value.field == "telemetry"


@pytest.mark.parametrize(("storage", "archive"), [
    ({"adapter": "fs", "path": "./.compact/archive"}, "./.compact/archive"),
    ({"adapter": "s3", "path": "bucket/prefix"}, "s3://bucket/prefix"),
    ({"adapter": "s3", "path": "s3://bucket/prefix"}, "s3://bucket/prefix"),
    ({"adapter": "memory"}, "memory"),
])
def test_storage_adapter_and_path_name_the_archive(storage: dict[str, str], archive: str) -> None:
    assert load_settings(env={}, storage=storage).storage.archive == archive


@pytest.mark.parametrize(("storage", "problem"), [
    ({"adapter": "custom"}, "ContextManager(archive="),
    ({"adapter": "ftp", "path": "x"}, "unknown adapter 'ftp'"),
    ({"adapter": "s3"}, "needs a path"),
    ({"adapter": "fs", "path": "a", "archive": "b"}, "either archive or adapter/path"),
])
def test_bad_storage_adapters_are_named(storage: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(env={}, storage=storage)
    assert problem in str(err.value) and err.value.field == "storage"


def test_version_string_of_the_documents_is_accepted() -> None:
    assert load_settings(env={}, version="1.0").version == 1


def test_nested_environment_names_reach_every_section() -> None:
    env = {
        "CONTEXTFOLD_POLICY__TRIGGER_PCT": "0.9",
        "CONTEXTFOLD_POLICY__PROTECTED_TOOLS": "todo_write, my_plan",
        "CONTEXTFOLD_POLICY__SUMMARY_DIRECTIVES": '["keep ids, names and numbers"]',
        "CONTEXTFOLD_TELEMETRY__EXPORTER": "console",
        "CONTEXTFOLD_STORAGE__ADAPTER": "s3",
        "CONTEXTFOLD_STORAGE__PATH": "bucket/p",
        "CONTEXTFOLD_REDACTION__PATTERNS": '["TCK-[0-9]{6}"]',
        "CONTEXTFOLD_SUMMARIZER": "openai:gpt-4o-mini",
    }
    s = load_settings(env=env)
    policy = s.policy_object()
    assert policy.trigger_pct == 0.9 and policy.protected_tools == ("todo_write", "my_plan")
    assert policy.summary_directives == ("keep ids, names and numbers",)
    assert s.telemetry.exporters == ("console",)
    assert s.storage.archive == "s3://bucket/p"
    assert s.redaction.redactor().redact_text("TCK-123456") == "[REDACTED:pattern_1]"
    assert s.summarizer == "openai:gpt-4o-mini"
    assert s.warnings == ()


def test_every_policy_field_has_a_flat_and_a_nested_variable() -> None:
    for name in ("emergency_message_count", "hard_cap_buffer", "user_message_budget", "summary_max_tokens"):
        flat = load_settings(env={f"COMPACT_{name.upper()}": "1234"}).policy_object()
        nested = load_settings(env={f"CONTEXTFOLD_POLICY__{name.upper()}": "4321",
                                    f"CONTEXTFOLD_{name.upper()}": "1234"}).policy_object()
        assert getattr(flat, name) == 1234
        assert getattr(nested, name) == 4321  # the nested name wins over the flat one


def test_unknown_prefixed_variables_are_reported_as_warnings() -> None:
    env = {"CONTEXTFOLD_TRIGER_PCT": "0.9", "CONTEXTFOLD_POLICY__NOPE": "1", "CONTEXTFOLD_REQUIRE_ALL": "1",
           "OTHER_THING": "x"}
    s = load_settings(env=env)
    assert s.policy == {}
    assert s.warnings == ("unknown environment variables ignored: CONTEXTFOLD_POLICY__NOPE, CONTEXTFOLD_TRIGER_PCT "
                          "(nested names look like CONTEXTFOLD_POLICY__TRIGGER_PCT)",)


def test_unknown_variables_reach_the_managers_events(tmp_path: Path) -> None:
    from contextfold.telemetry import RecordingTelemetry

    sink = RecordingTelemetry()
    cm = ContextManager.from_config(env={"CONTEXTFOLD_TYPO": "1"}, store="memory", archive="memory", telemetry=sink)
    try:
        warnings = [e.message for e in sink.events if e.name == "compact.warning"]
        assert any("CONTEXTFOLD_TYPO" in w for w in warnings)
    finally:
        cm.close()


def test_bad_nested_value_names_the_variable_and_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(env={"CONTEXTFOLD_POLICY__TRIGGER_PCT": "2"})
    assert err.value.field == "policy.trigger_pct"
    assert "CONTEXTFOLD_POLICY__TRIGGER_PCT" in str(err.value)


def test_summarizer_is_chosen_from_yaml(tmp_path: Path) -> None:
    path = _write(tmp_path, "summarizer: extractive\npolicy: {strategy: brief}\n")
    cm = ContextManager.from_config(str(path), env={}, store="memory", archive="memory")
    try:
        assert cm.summarizer.name == "extractive" and cm.policy.strategy == "brief"
    finally:
        cm.close()


def test_protected_tools_default_to_the_todo_and_plan_tools() -> None:
    assert Policy().protected_tools == DEFAULT_PROTECTED_TOOLS == (
        "manage_todo_list", "todo_write", "TodoWrite", "update_plan")


def _history_with_protected_dict(flag: str) -> list[dict[str, object]]:
    return [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "SECURITY POLICY: never print the customer's card number.", "meta": {flag: True}},
        *[m for i in range(12) for m in (
            {"role": "user", "content": f"step {i}: " + "tell me more about the weather " * 30},
            {"role": "assistant", "content": f"answer {i}: " + "it is sunny and warm today " * 30},
        )],
    ]


@pytest.mark.parametrize("flag", ["protected", "pinned"])
def test_dict_messages_with_the_protected_flag_survive_compaction(flag: str) -> None:
    cm = ContextManager("gpt-4o", store="memory", archive="memory", policy={"protected_flag": flag,
                                                                              "keep_recent_turns": 1})
    try:
        cm.add(_history_with_protected_dict(flag))
        first = cm.messages()[1]
        assert first.protected and first.meta[flag] is True and "meta" not in first.extra
        report = cm.compact()
        assert report.compacted > 0
        kept = [m for m in cm.messages() if "SECURITY POLICY" in m.text]
        assert [m.text for m in kept] == ["SECURITY POLICY: never print the customer's card number."]
        # meta is never sent to the provider
        assert all("meta" not in item for item in cm.prepare(format="openai_chat"))
    finally:
        cm.close()


def test_a_dict_flag_other_than_the_configured_one_does_not_protect() -> None:
    cm = ContextManager("gpt-4o", store="memory", archive="memory", policy={"protected_flag": "pinned"})
    try:
        cm.add({"role": "user", "content": "hi", "meta": {"label": "greeting"}})
        m = cm.messages()[0]
        assert not m.protected and m.meta["label"] == "greeting"
    finally:
        cm.close()


def test_message_objects_honour_a_custom_flag_too() -> None:
    cm = ContextManager("gpt-4o", store="memory", archive="memory", policy={"protected_flag": "pinned"})
    try:
        cm.add([Message.user("keep me", meta={"pinned": True})])
        assert cm.messages()[0].protected
    finally:
        cm.close()
