"""The pydantic model that validates a :class:`~.policy.Policy`'s values, generated from its fields on first use.

:class:`~.policy.Policy` is a plain frozen dataclass, so that a default manager imports no pydantic (issue 22: its
import was most of a process's first ``ContextManager(...)``). Whatever is not the default goes through this model:
each field's type from the dataclass, its constraints (``gt``, ``le``, ``min_length``, ``description``) from the
field's metadata, and the checks below, so that ``Policy(trigger_pct=2)`` raises pydantic's ``ValidationError``
naming the field, as a config file's error does (:func:`contextfold.config.load_settings`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    create_model,
    field_validator,
)
from pydantic_core import CoreSchema
from pydantic_core import core_schema as schemas

from ..steering.tool_policy import parse_tool_policies

__all__ = ["core_schema", "model_of", "validated"]


def validated(policy: Any, values: object, **options: Any) -> dict[str, Any]:
    """Every field of ``policy`` (:class:`~.policy.Policy` or a subclass) from ``values``, validated and coerced.

    The class is passed in, not imported (and typed ``Any``): the policy module imports this one.

    ``values`` maps some of the fields; ``options`` are ``model_validate``'s (``strict``, ``from_attributes``).

    Raises:
        pydantic.ValidationError: naming the field (an unknown key, a value out of range, a blank entry, …).
    """
    model = model_of(policy).model_validate(dict(values) if isinstance(values, Mapping) else values, **options)
    return {name: getattr(model, name) for name in policy.model_fields}


def core_schema(policy: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
    """How a pydantic model validates and dumps a field holding a policy (``policy: Policy = Policy()``).

    A policy passes as it is; anything else goes through the generated model, every check and error location of
    ``Policy(**values)`` with it (``policy.custom_prompt``); the field dumps as :meth:`~.policy.Policy.model_dump`.
    """

    def to_policy(value: object, validate: ValidatorFunctionWrapHandler) -> object:
        if isinstance(value, policy):
            return value
        checked = validate(value)
        return policy.model_construct(checked.model_fields_set,
                                      **{name: getattr(checked, name) for name in policy.model_fields})

    def dump(value: Any, info: schemas.SerializationInfo) -> dict[str, Any]:
        dumped: dict[str, Any] = value.model_dump(mode="json" if info.mode_is_json() else "python")
        return dumped

    return schemas.no_info_wrap_validator_function(
        to_policy, handler.generate_schema(model_of(policy)),
        serialization=schemas.plain_serializer_function_ser_schema(dump, info_arg=True))


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


_MODELS: dict[type, type[BaseModel]] = {}
# (Threads that make their first policies at once build the model once: pydantic's build is milliseconds of CPU.)
_BUILDING = threading.Lock()


def model_of(policy: type) -> type[BaseModel]:
    """The model validating ``policy`` (the class or a subclass), built once per class."""
    model = _MODELS.get(policy)
    if model is None:
        with _BUILDING:
            model = _MODELS.get(policy)
            if model is None:
                model = _MODELS[policy] = _build(policy)
    return model


def _build(policy: Any) -> type[BaseModel]:
    """The model: named as the class (its errors say "validation error for Policy")."""
    hints = get_type_hints(policy)  # (the names in the policy module's namespace, a subclass's in its own)
    definitions: dict[str, Any] = {}
    for spec in fields(policy):
        if not spec.init:  # (the private record of the fields given)
            continue
        if spec.default_factory is not MISSING:
            setting = Field(default_factory=spec.default_factory, **spec.metadata)
        else:
            setting = Field(default=spec.default, **spec.metadata)
        definitions[spec.name] = (hints[spec.name], setting)
    model: type[BaseModel] = create_model(policy.__name__, __base__=_Checks, __module__=__name__, **definitions)
    return model
