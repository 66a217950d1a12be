"""The pydantic model that validates a :class:`~.policy.Policy`'s values, generated from its fields on first use.

:class:`~.policy.Policy` is a plain frozen dataclass, so that a default manager imports no pydantic (issue 22: its
import was most of a process's first ``ContextManager(...)``). Whatever is not the default goes through this model:
each field's type from the dataclass, its constraints (``gt``, ``le``, ``min_length``, ``description``) from the
field's metadata, and the checks below, so that ``Policy(trigger_pct=2)`` raises pydantic's ``ValidationError``
naming the field, as a config file's error does (:func:`contextfold.config.load_settings`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator

from ..steering.tool_policy import parse_tool_policies

__all__ = ["validated"]


def validated(policy: type, values: object) -> dict[str, Any]:
    """Every field of ``policy`` (the :class:`~.policy.Policy` class) from ``values``, validated and coerced.

    ``values`` maps some of the fields. The class is passed in, not imported: the policy module imports this one.

    Raises:
        pydantic.ValidationError: naming the field (an unknown key, a value out of range, a blank entry, …).
    """
    model = _model(policy).model_validate(dict(values) if isinstance(values, Mapping) else values)
    return {spec.name: getattr(model, spec.name) for spec in fields(policy)}


class _Checks(BaseModel):
    """The checks beyond each field's type and range (the fields are added by :func:`_model`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    @field_validator("custom_prompt", check_fields=False)
    @classmethod
    def _custom_needs_prompt(cls, value: str | None, info: ValidationInfo) -> str | None:
        # info.data holds the fields validated before this one; strategy is declared above.
        if info.data.get("strategy") == "custom" and not (value or "").strip():
            raise ValueError("strategy 'custom' needs a non-empty custom_prompt")
        return value

    @field_validator("summary_header", check_fields=False)
    @classmethod
    def _header_fields(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if "\n" in value:
            raise ValueError("must be one line")
        try:
            value.format(version=1, count=2)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"may use only {{version}} and {{count}}: {exc!r}") from None
        return value

    @field_validator("keep_thinking_turns", check_fields=False)
    @classmethod
    def _turns_not_negative(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 0:
            raise ValueError("must be 'all' or a number of turns, at least 0")
        return value

    @field_validator("tools", mode="before", check_fields=False)
    @classmethod
    def _tool_policies(cls, value: object) -> object:
        # A mapping, a list of entries with a "tool" key, or (from the environment) the JSON text of either.
        return parse_tool_policies(value)

    @field_validator("protected_tools", "exclude_tools", "roles_never_prune", mode="before", check_fields=False)
    @classmethod
    def _comma_string(cls, value: object) -> object:
        # From the environment a list of names arrives as one string: "todo_write, update_plan".
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return value

    @field_validator("summary_directives", "retain_directives", mode="before", check_fields=False)
    @classmethod
    def _one_directive(cls, value: object) -> object:
        # Directives are sentences (commas included): a single string is one directive.
        return (value,) if isinstance(value, str) else value

    @field_validator("protected_tools", "exclude_tools", "summary_directives", "retain_directives",
                     check_fields=False)
    @classmethod
    def _no_blank_entries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for i, item in enumerate(value):
            if not item.strip():
                raise ValueError(f"entry {i} is blank")
        return value


@functools.cache
def _model(policy: type) -> type[BaseModel]:
    """The model, built once: named as the class (its errors say "validation error for Policy")."""
    hints = get_type_hints(policy)  # (the names in the policy module's namespace)
    definitions: dict[str, Any] = {}
    for spec in fields(policy):
        if spec.default_factory is not MISSING:
            setting = Field(default_factory=spec.default_factory, **spec.metadata)
        else:
            setting = Field(default=spec.default, **spec.metadata)
        definitions[spec.name] = (hints[spec.name], setting)
    model: type[BaseModel] = create_model(policy.__name__, __base__=_Checks, __module__=__name__, **definitions)
    return model
