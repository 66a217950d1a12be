"""Per-tool policies: what contextfold may do with the outputs of each tool, by tool name or glob.

.. code-block:: yaml

    policy:
      tools:
        bash: {mask_after_turns: 3}                 # masked once 3 model turns have passed
        "read_*": {max_tokens: 4000}                 # write-time cap for these outputs (000's TOOL_OUTPUT_MAX_TOKENS)
        screenshot: {keep_whole: true}               # never cut at write time, never masked
        search_docs: {never_mask: true}
        manage_todo_list: {protected: true}          # 000's PROTECTED_TOOLS: never cut, masked or summarized
        get_reservation_details: {resource: {key: reservation_id}}
        "update_reservation_*": {resource: {key: reservation_id, access: edit}}

Every entry whose glob matches a tool applies, in the order given, a later one overriding the fields it sets; the
built-in entries (:data:`~contextfold.steering.resources.DEFAULT_RESOURCE_RULES`) come first. A field left unset
keeps the session-wide behaviour. Pure data: the manager reads it (:class:`ToolPolicies`).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ._checks import SettingError, check_known, flag, whole_number
from .resource_rule import ResourceRule
from .resources import DEFAULT_RESOURCE_RULES

__all__ = ["ResolvedToolPolicy", "ToolPolicies", "ToolPolicy", "parse_tool_policies"]

# Glob characters: a name with none of them is matched exactly (and cheaply).
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True, slots=True, weakref_slot=True)
class ToolPolicy:
    """The rules for the outputs of the tools one name or glob matches. Unset fields (None) change nothing.

    A frozen dataclass checked in plain Python (:mod:`._checks`): every default manager builds the built-in entries,
    and imports no pydantic (issue 22).

    Attributes:
        max_tokens: Write-time cap of one output, in tokens (000's ``TOOL_OUTPUT_MAX_TOKENS``, per tool); the
            session-wide cap otherwise.
        keep_whole: Never cut at write time and never masked (screenshots, small structured records).
        never_mask: Never masked (Anthropic context editing's ``exclude_tools``); may still be cut at write time.
        mask_after_turns: Masked first once this many model turns followed it; until then never masked.
        summarize: False keeps the call and its output verbatim through compaction (like ``protected_tools``).
        protected: 000's ``PROTECTED_TOOLS``: never cut, masked or summarized (``keep_whole`` and
            ``summarize: false`` together).
        resource: What a call reads or edits, for superseded reads (:class:`ResourceRule`, or its settings as a
            mapping).

    Raises:
        SettingError: (a ValueError) naming the field (``max_tokens``, ``resource.key``) and the problem.
    """

    max_tokens: int | None = None
    keep_whole: bool | None = None
    never_mask: bool | None = None
    mask_after_turns: int | None = None
    summarize: bool | None = None
    protected: bool | None = None
    resource: ResourceRule | None = None

    def __post_init__(self) -> None:
        # (Values as a settings file may give them, "4000" or "yes", are kept as the number or flag they say.)
        object.__setattr__(self, "max_tokens", whole_number("max_tokens", self.max_tokens, least=1))
        object.__setattr__(self, "mask_after_turns", whole_number("mask_after_turns", self.mask_after_turns, least=0))
        for name in ("keep_whole", "never_mask", "summarize", "protected"):
            object.__setattr__(self, name, flag(name, getattr(self, name)))
        resource: object = self.resource
        if isinstance(resource, Mapping):
            try:
                object.__setattr__(self, "resource", ResourceRule.from_settings(resource))
            except SettingError as exc:
                raise exc.within("resource") from None
            except TypeError as exc:  # (a key given twice cannot happen in a mapping; kept for a clear message)
                raise SettingError("resource", str(exc)) from None
        elif resource is not None and not isinstance(resource, ResourceRule):
            raise SettingError("resource", "Input should be a ResourceRule or a mapping of its settings")

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    def __setstate__(self, state: object) -> None:
        # (also what pydantic pickled when this was a pydantic model; an unknown field is refused, not dropped)
        from .._pickled import pickled_fields

        values, _ = pickled_fields("ToolPolicy", state, _FIELDS)
        for spec in fields(self):
            object.__setattr__(self, spec.name, values.get(spec.name, spec.default))

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ToolPolicy:
        """A tool's rules from a config file's mapping, unknown keys refused."""
        check_known(settings, _FIELDS)
        return cls(**settings)

    def settings(self) -> dict[str, Any]:
        """The fields that are set (not None), ``resource`` as the rule itself."""
        return {name: value for name in _FIELDS if (value := getattr(self, name)) is not None}


_FIELDS = tuple(f.name for f in fields(ToolPolicy))


@dataclass(frozen=True, slots=True)
class ResolvedToolPolicy:
    """The rules in force for one tool name, every matching entry applied."""

    max_tokens: int | None = None
    keep_whole: bool = False
    never_mask: bool = False
    mask_after_turns: int | None = None
    summarize: bool = True
    resource: ResourceRule | None = None

    @property
    def maskable(self) -> bool:
        """Whether masking may ever replace this tool's outputs."""
        return not (self.keep_whole or self.never_mask)


_NO_RULES = ResolvedToolPolicy()


def parse_tool_policies(value: Any) -> dict[str, ToolPolicy]:
    """``policy.tools`` from Python, YAML or the environment, validated.

    A mapping of glob -> fields (from the environment, the JSON text of one), or a list of entries each with a
    ``tool`` key. Validation errors name the glob.

    Raises:
        ValueError: naming the entry and the field.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON object of tool name -> settings: {exc}") from None
    if isinstance(value, list | tuple):
        entries: dict[str, Any] = {}
        for i, item in enumerate(value):
            if not isinstance(item, Mapping) or not isinstance(item.get("tool"), str):
                raise ValueError(f"entry {i} must be a mapping with a 'tool' name or glob")
            entries[item["tool"]] = {k: v for k, v in item.items() if k != "tool"}
        value = entries
    if not isinstance(value, Mapping):
        raise ValueError(f"must map tool names (globs) to their settings, got {type(value).__name__}")
    out: dict[str, ToolPolicy] = {}
    for glob, settings in value.items():
        if not isinstance(glob, str) or not glob.strip():
            raise ValueError(f"tool name {glob!r} must be a non-empty string")
        if isinstance(settings, ToolPolicy):
            out[glob] = settings
            continue
        if not isinstance(settings, Mapping):
            raise ValueError(f"{glob}: settings must be a mapping, got {type(settings).__name__}")
        try:
            out[glob] = ToolPolicy.from_settings(settings)
        except SettingError as exc:
            raise ValueError(f"{glob}.{exc.path}: {exc.problem}") from None
    return out


# The entries of DEFAULT_RESOURCE_RULES, built once (every manager's policies start with them).
_BUILT_IN = tuple((glob, ToolPolicy(resource=rule)) for glob, rule in DEFAULT_RESOURCE_RULES.items())


def _matches(glob: str, name: str) -> bool:
    if _GLOB_CHARS.isdisjoint(glob):
        return glob == name
    return fnmatch.fnmatchcase(name, glob)


class ToolPolicies:
    """Tool name -> :class:`ResolvedToolPolicy`, from the built-in resource rules and the configured entries.

    Args:
        entries: glob -> :class:`ToolPolicy`, in order (later entries override what they set).
        defaults: Apply :data:`DEFAULT_RESOURCE_RULES` first (the common file tools' resources).
    """

    def __init__(self, entries: Mapping[str, ToolPolicy] | Iterable[tuple[str, ToolPolicy]] = (), *,
                 defaults: bool = True) -> None:
        items = list(entries.items()) if isinstance(entries, Mapping) else list(entries)
        self._entries: list[tuple[str, ToolPolicy]] = [*(_BUILT_IN if defaults else ()), *items]
        self._configured = bool(items)
        self._resolved: dict[str, ResolvedToolPolicy] = {}
        # (entries are frozen and fixed here: read on every prepare(), answered once)
        self._turn_rules = any(entry.mask_after_turns is not None for _, entry in self._entries)

    @property
    def configured(self) -> bool:
        """Whether any entry beyond the built-in defaults was given."""
        return self._configured

    @property
    def turn_rules(self) -> bool:
        """Whether some entry sets ``mask_after_turns`` (only then is the view scanned for due outputs)."""
        return self._turn_rules

    def for_tool(self, name: str | None) -> ResolvedToolPolicy:
        """The rules for tool ``name`` (remembered: a session uses a handful of tools)."""
        if not name:
            return _NO_RULES
        known = self._resolved.get(name)
        if known is not None:
            return known
        merged: dict[str, Any] = {}
        for glob, entry in self._entries:
            if _matches(glob, name):
                merged.update(entry.settings())
        protected = merged.pop("protected", None)
        if protected:
            merged.update(keep_whole=True, never_mask=True, summarize=False)
        resolved = ResolvedToolPolicy(**merged) if merged else _NO_RULES
        self._resolved[name] = resolved
        return resolved

    def resource_rule(self, name: str) -> ResourceRule | None:
        """The resource rule of tool ``name`` (superseded reads), or None."""
        return self.for_tool(name).resource
