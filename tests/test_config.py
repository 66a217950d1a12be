"""Configuration: file < environment < keyword arguments, and errors that name the source and the field path."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.compaction import Policy
from contextfold.config import ENV_VARS, Settings, load_settings
from contextfold.errors import ConfigError

FULL = """\
version: 1
model: gpt-4o
max_context_tokens: 128000
policy:
  trigger_pct: 0.8
  keep_recent_turns: 4
telemetry:
  exporters: [jsonl, ariadne]
  jsonl_path: events.jsonl
  queue_size: 500
storage:
  store: local
  archive: s3://bucket/archive
redaction:
  enabled: true
  patterns:
    ticket: "TCK-[0-9]{6}"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "contextfold.yaml"
    path.write_text(text)
    return path


def test_defaults_without_any_source() -> None:
    s = load_settings(env={})
    assert s == Settings()
    assert s.redaction.enabled and s.warnings == ()
    assert s.policy_object() == Policy()


def test_full_file(tmp_path: Path) -> None:
    s = load_settings(_write(tmp_path, FULL), env={})
    assert s.model == "gpt-4o" and s.max_context_tokens == 128_000
    assert s.policy == {"trigger_pct": 0.8, "keep_recent_turns": 4}
    assert s.policy_object().trigger_pct == 0.8
    assert s.telemetry.exporters == ("jsonl", "ariadne") and s.telemetry.queue_size == 500
    assert s.storage.archive == "s3://bucket/archive"
    assert s.redaction.redactor().redact_text("see TCK-123456") == "see [REDACTED:ticket]"


def test_precedence_file_then_env_then_kwargs(tmp_path: Path) -> None:
    path = _write(tmp_path, FULL)
    env = {"CONTEXTFOLD_TRIGGER_PCT": "0.9", "CONTEXTFOLD_MODEL": "gpt-4.1", "CONTEXTFOLD_STORE": "memory"}
    s = load_settings(path, env=env)
    assert (s.model, s.policy["trigger_pct"], s.storage.store) == ("gpt-4.1", 0.9, "memory")
    assert s.policy["keep_recent_turns"] == 4  # untouched keys of the file survive a nested override
    s = load_settings(path, env=env, model="claude-sonnet-4", policy={"trigger_pct": 0.7})
    assert (s.model, s.policy["trigger_pct"], s.policy["keep_recent_turns"]) == ("claude-sonnet-4", 0.7, 4)
    assert s.storage.archive == "s3://bucket/archive"


def test_compact_aliases_and_contextfold_names_win() -> None:
    s = load_settings(env={"COMPACT_TRIGGER_PCT": "0.6", "COMPACT_KEEP_RECENT_TURNS": "2"})
    assert s.policy == {"trigger_pct": 0.6, "keep_recent_turns": 2}
    s = load_settings(env={"COMPACT_TRIGGER_PCT": "0.6", "CONTEXTFOLD_TRIGGER_PCT": "0.95"})
    assert s.policy["trigger_pct"] == 0.95


@pytest.mark.parametrize(
    ("suffix", "value", "check"),
    [
        ("MODEL", "gpt-4o", lambda s: s.model == "gpt-4o"),
        ("MAX_CONTEXT_TOKENS", "32000", lambda s: s.max_context_tokens == 32_000),
        ("SOFT_PCT", "0.5", lambda s: s.policy["soft_pct"] == 0.5),
        ("ARCHIVE", "/var/archive", lambda s: s.storage.archive == "/var/archive"),
        ("REDACTION", "false", lambda s: s.redaction.enabled is False),
        ("EXPORTERS", "console, jsonl", lambda s: s.telemetry.exporters == ("console", "jsonl")),
        ("QUEUE_SIZE", "64", lambda s: s.telemetry.queue_size == 64),
    ],
)
def test_environment_overrides(suffix: str, value: str, check: object) -> None:
    assert suffix in ENV_VARS
    for prefix in ("CONTEXTFOLD_", "COMPACT_"):
        s = load_settings(env={prefix + suffix: value})
        assert callable(check) and check(s), prefix + suffix


def test_config_file_from_environment(tmp_path: Path) -> None:
    path = _write(tmp_path, "model: from-file\n")
    assert load_settings(env={"CONTEXTFOLD_CONFIG": str(path)}).model == "from-file"


def test_kwargs_accept_a_policy_object() -> None:
    s = load_settings(env={"CONTEXTFOLD_TRIGGER_PCT": "0.9"}, policy=Policy(keep_recent_turns=7))
    assert s.policy_object().keep_recent_turns == 7
    assert s.policy_object().trigger_pct == Policy().trigger_pct  # a whole Policy replaces env keys


def test_redaction_disabled_gives_a_warning() -> None:
    s = load_settings(env={}, redaction={"enabled": False})
    assert len(s.warnings) == 1 and "redaction is disabled" in s.warnings[0]
    assert s.redaction.redactor().redact_text("sk-" + "a" * 40) == "sk-" + "a" * 40


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"CONTEXTFOLD_TRIGGER_PCT": "1.5"}, "environment variable CONTEXTFOLD_TRIGGER_PCT: policy.trigger_pct: "),
        ({"COMPACT_KEEP_RECENT_TURNS": "many"}, "environment variable COMPACT_KEEP_RECENT_TURNS: policy.keep_recent"),
        ({"CONTEXTFOLD_MAX_CONTEXT_TOKENS": "-5"}, "CONTEXTFOLD_MAX_CONTEXT_TOKENS: max_context_tokens: "),
        ({"CONTEXTFOLD_REDACTION": "perhaps"}, "CONTEXTFOLD_REDACTION: redaction.enabled: "),
        ({"CONTEXTFOLD_EXPORTERS": "console,carrier-pigeon"}, "CONTEXTFOLD_EXPORTERS: telemetry.exporters[1]: "),
    ],
)
def test_bad_environment_values_name_variable_and_field(env: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(env=env)
    assert expected in str(err.value)


def test_bad_file_values_name_file_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "policy:\n  trigger_pct: 2\n")
    with pytest.raises(ConfigError) as err:
        load_settings(path, env={})
    assert err.value.field == "policy.trigger_pct"
    assert err.value.source == f"file {path}"
    assert str(err.value).startswith(f"file {path}: policy.trigger_pct: ")
    assert "less than or equal to 1" in str(err.value)


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("policy:\n  trigger_pc: 0.5\n", "policy.trigger_pc", "unknown setting"),
        ("storage:\n  bucket: x\n", "storage.bucket", "unknown setting"),
        ("colour: red\n", "colour", "unknown setting"),
        ("version: 2\n", "version", "unsupported version 2"),
        ("redaction:\n  patterns:\n    bad: '(['\n", "redaction.patterns", "not a valid regular expression"),
        ("telemetry:\n  queue_size: 0\n", "telemetry.queue_size", "greater than 0"),
        ("policy: [1, 2]\n", "policy", "must be a mapping"),
    ],
)
def test_bad_file_content(tmp_path: Path, text: str, field: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_write(tmp_path, text), env={})
    assert err.value.field == field
    assert problem in str(err.value)


def test_kwarg_errors_name_keyword_arguments() -> None:
    with pytest.raises(ConfigError, match=r"^keyword arguments: policy\.soft_pct: "):
        load_settings(env={}, policy={"soft_pct": 3})
    with pytest.raises(ConfigError, match=r"^keyword arguments: trigger_pct: unknown setting"):
        load_settings(env={}, trigger_pct=0.5)


def test_env_value_blamed_only_for_its_own_field(tmp_path: Path) -> None:
    # The file's bad value is reported against the file even though the environment set a sibling key.
    path = _write(tmp_path, "policy:\n  keep_recent_turns: -1\n")
    with pytest.raises(ConfigError) as err:
        load_settings(path, env={"CONTEXTFOLD_TRIGGER_PCT": "0.9"})
    assert err.value.source == f"file {path}" and err.value.field == "policy.keep_recent_turns"


@pytest.mark.parametrize(
    ("text", "line"),
    [("model: gpt-4o\npolicy:\n  trigger_pct: [0.5\n", 4), ("a: 1\n b: 2\n", 2), ("x: 'open\n", 2)],
)
def test_bad_yaml_names_the_line(tmp_path: Path, text: str, line: int) -> None:
    with pytest.raises(ConfigError, match=rf"invalid YAML: line {line}, column \d+"):
        load_settings(_write(tmp_path, text), env={})


def test_missing_file_and_non_mapping_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_settings(tmp_path / "nope.yaml", env={})
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_settings(_write(tmp_path, "- a\n- b\n"), env={})
    assert load_settings(_write(tmp_path, "# only a comment\n"), env={}) == Settings()


def test_settings_are_frozen() -> None:
    s = load_settings(env={})
    with pytest.raises(Exception, match="frozen"):
        s.model = "x"  # type: ignore[misc]


@settings(max_examples=40, deadline=None)
@given(
    file_v=st.floats(0.05, 1.0),
    env_v=st.none() | st.floats(0.05, 1.0),
    kw_v=st.none() | st.floats(0.05, 1.0),
)
def test_precedence_property(
    tmp_path_factory: pytest.TempPathFactory, file_v: float, env_v: float | None, kw_v: float | None
) -> None:
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_text(f"policy:\n  trigger_pct: {file_v!r}\n")
    env = {} if env_v is None else {"COMPACT_TRIGGER_PCT": repr(env_v)}
    kwargs = {} if kw_v is None else {"policy": {"trigger_pct": kw_v}}
    s = load_settings(path, env=env, **kwargs)
    expected = kw_v if kw_v is not None else env_v if env_v is not None else file_v
    assert s.policy["trigger_pct"] == expected
