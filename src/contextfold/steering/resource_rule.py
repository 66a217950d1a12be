"""How to tell what resource a call of one tool reads or edits: the :class:`ResourceRule` of superseded reads.

A frozen dataclass checked in plain Python (:mod:`._checks`): the built-in rules
(:data:`~contextfold.steering.resources.DEFAULT_RESOURCE_RULES`) are built with every default manager, which imports
no pydantic (issue 22). :func:`~contextfold.steering.resources.superseded_reads` reads the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from ._checks import SettingError, check_known, names

__all__ = ["ResourceRule"]

_ACCESS = ("read", "edit")


@dataclass(frozen=True, slots=True)
class ResourceRule:
    """How to tell what resource a call of one tool reads or edits, from its arguments.

    Each field names candidate arguments (one name or a tuple of them); the first one present in a call is used.

    Attributes:
        key: Arguments naming the resource (``path``; ``reservation_id``). The values of every one present, in
            this order, are the name (the argument names are not: ``file_path`` of one tool and ``path`` of another
            name the same file), so a composite key (``origin`` + ``destination`` + ``date``) works too. A call
            with none is ignored.
        access: What a call does to the resource: ``read`` or ``edit`` (when ``command`` does not say).
        command: The argument selecting the operation of a multiplexed tool (``str_replace_editor``'s
            ``command``); ``reads`` and ``edits`` list its values that read and that edit (others do neither).
        range: An argument holding ``[first, last]`` lines (``view_range``; ``-1`` or null: to the end).
        start: An argument holding the first line (``start_line``, ``offset``).
        end: An argument holding the last line (``end_line``).
        limit: An argument holding how many lines from ``start`` (``limit``).
        changed_text: For an edit: an argument holding the text it replaces (``old_str``). An earlier read is
            superseded only if its output shows that text (its first non-blank line); a read of another part of
            the file stays current. Without it (or when the call does not have it) an edit supersedes every read.
        changed_line: For an edit: an argument holding the line it changes (``insert_line``); an earlier read is
            superseded only if its range holds that line.

    Raises:
        SettingError: (a ValueError) naming the field: no key, an unknown access, a command without the values
            that read or edit.
    """

    key: tuple[str, ...]
    access: Literal["read", "edit"] = "read"
    command: str | None = None
    reads: tuple[str, ...] = ()
    edits: tuple[str, ...] = ()
    range: tuple[str, ...] = ()
    start: tuple[str, ...] = ()
    end: tuple[str, ...] = ()
    limit: tuple[str, ...] = ()
    changed_text: tuple[str, ...] = ()
    changed_line: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in _NAME_FIELDS:
            value = getattr(self, name)
            if type(value) is not tuple or not all(type(v) is str for v in value):
                object.__setattr__(self, name, names(name, value))
        if not self.key or not all(v.strip() for v in self.key):
            raise SettingError("key", "name at least one argument (e.g. key: path)")
        if self.access not in _ACCESS:
            raise SettingError("access", "Input should be 'read' or 'edit'")
        if self.command is not None and not isinstance(self.command, str):
            raise SettingError("command", "Input should be a valid string")
        if self.command is not None and not (self.reads or self.edits):
            raise SettingError("command", f"command {self.command!r} needs the values that read (reads) or edit "
                                          "(edits)")

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    def __setstate__(self, state: object) -> None:
        # (also what pydantic pickled when this was a pydantic model; an unknown field is refused, not dropped)
        from .._pickled import pickled_fields

        values, _ = pickled_fields("ResourceRule", state, _FIELDS)
        for spec in fields(self):
            object.__setattr__(self, spec.name, values.get(spec.name, spec.default))

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ResourceRule:
        """A rule from a config file's mapping (``{key: reservation_id, access: edit}``), unknown keys refused."""
        check_known(settings, _FIELDS)
        if "key" not in settings:
            raise SettingError("key", "Field required")
        return cls(**settings)


_FIELDS = tuple(f.name for f in fields(ResourceRule))
_NAME_FIELDS = tuple(name for name in _FIELDS if name not in ("access", "command"))
