"""Reading pickled settings objects, this version's and those pydantic pickled before they became dataclasses.

``Policy``, ``ToolPolicy`` and ``ResourceRule`` were pydantic models up to issue 22: their pickles hold pydantic's
state (``{"__dict__": fields, "__pydantic_fields_set__": names, ...}``). Imported only when one is unpickled.
"""

from __future__ import annotations

import pickle
from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["pickled_fields"]

# pydantic's keys of a model's pickled state; the extra and private parts hold nothing for these models.
_PYDANTIC_STATE = frozenset({"__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"})


def pickled_fields(kind: str, state: object, known: Collection[str]) -> tuple[dict[str, Any], frozenset[str] | None]:
    """The field values in the pickled ``state`` of a ``kind`` (``Policy``), and the fields given, when recorded.

    Raises:
        pickle.UnpicklingError: the state is not one of those layouts or names a field ``kind`` does not have
            (pickled by another version of contextfold): loading it as the defaults would change settings silently.
    """
    if not isinstance(state, Mapping):
        raise pickle.UnpicklingError(f"cannot load a pickled {kind}: its state is a {type(state).__name__}, not a "
                                     "mapping of its fields")
    given: frozenset[str] | None = None
    values: object = state
    if "__dict__" in state:
        unknown_parts = sorted(set(state) - _PYDANTIC_STATE)
        if unknown_parts:
            raise pickle.UnpicklingError(f"cannot load a pickled {kind}: unknown part {unknown_parts[0]!r}")
        for part in ("__pydantic_extra__", "__pydantic_private__"):
            if state.get(part):
                raise pickle.UnpicklingError(f"cannot load a pickled {kind}: {part} is not empty")
        values = state["__dict__"]
        if state.get("__pydantic_fields_set__") is not None:
            given = frozenset(state["__pydantic_fields_set__"])
    if not isinstance(values, Mapping):
        raise pickle.UnpicklingError(f"cannot load a pickled {kind}: its fields are not a mapping")
    unknown = [name for name in values if name not in known]
    if unknown:
        raise pickle.UnpicklingError(f"cannot load a pickled {kind}: unknown field {unknown[0]!r} (pickled by "
                                     "another version of contextfold?)")
    return dict(values), given
