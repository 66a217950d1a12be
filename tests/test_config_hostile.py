"""Hostile configuration is a ConfigError naming the setting, never a ValueError or RecursionError (issue 21 §5).

Before: a 5,000-digit integer in the YAML file ended as ValueError (Python's int conversion limit), deep nesting
and a nested-JSON environment value as RecursionError, and an alias bomb would have been expanded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.config import MAX_CONFIG_DEPTH, load_settings
from contextfold.errors import ConfigError

ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9) if previous else ', '.join(['1'] * 9)}]\n"
    for previous, name in zip([None, "a", "b", "c", "d", "e", "f"], "abcdefg", strict=True)
)


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("max_context_tokens: " + "9" * 5_000, "max_context_tokens", "a number of 5,000 characters, longer than"),
        ("policy:\n  keep_recent_turns: " + "9" * 5_000, "policy.keep_recent_turns", "a number of 5,000"),
        ("policy:\n  protected_tools: " + "[" * 1_500 + "]" * 1_500,
         "policy.protected_tools" + "[0]" * (MAX_CONFIG_DEPTH - 2), f"nested more than {MAX_CONFIG_DEPTH} levels"),
        ("policy: " + "{a: " * 2_000 + "1" + "}" * 2_000, "policy" + ".a" * (MAX_CONFIG_DEPTH - 1),
         f"nested more than {MAX_CONFIG_DEPTH} levels"),
        (ALIAS_BOMB, "e", "expands to more than 100,000 values"),
    ],
    ids=["long-int", "long-int-nested", "deep-list", "deep-map", "alias-bomb"],
)
def test_a_hostile_file_is_a_config_error_naming_the_field(tmp_path: Path, text: str, field: str,
                                                            problem: str) -> None:
    path = tmp_path / "contextfold.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env={})
    assert caught.value.field == field
    assert str(caught.value).startswith(f"file {path}: {field}: {problem}")


def test_an_ordinary_file_with_aliases_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "contextfold.yaml"
    path.write_text("tools: &tools [todo_write, update_plan]\nmodel: gpt-4o\npolicy:\n  protected_tools: *tools\n"
                    "  keep_recent_turns: 3\n".replace("tools: &tools", "x-tools: &tools"))
    with pytest.raises(ConfigError, match="x-tools: unknown setting"):  # an extra key is named as before
        load_settings(path, env={})
    path.write_text("model: gpt-4o\npolicy: &p\n  protected_tools: [todo_write, update_plan]\n  keep_recent_turns: 3\n")
    settings = load_settings(path, env={})
    assert settings.policy == {"protected_tools": ("todo_write", "update_plan"), "keep_recent_turns": 3}


@pytest.mark.parametrize("variable", ["CONTEXTFOLD_POLICY__KEEP_RECENT_TURNS", "CONTEXTFOLD_POLICY__TRIGGER_PCT",
                                      "CONTEXTFOLD_POLICY__SUMMARY_MAX_TOKENS", "CONTEXTFOLD_POLICY__SOFT_PCT"])
def test_nested_json_garbage_in_an_environment_variable_names_the_variable(variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env={variable: "[" * 5_000 + "]" * 5_000})
    assert str(caught.value).startswith(f"environment variable {variable}: policy.")
