"""What the Gemini API rejects, checked on ``contents`` (the JSONL form may hold system/developer items too)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InvalidHistory
from ._common import as_items, expect_list, expect_mapping, expect_str, role_of
from ._gemini_parts import check_camel_case

__all__ = ["validate"]


def validate(items: Iterable[Mapping[str, Any]]) -> None:
    """Raise :class:`InvalidHistory` for what the Gemini API rejects.

    Checked: role ``user`` or ``model`` (``system``/``developer`` items travel apart); ``parts`` a non-empty
    array of objects; ``functionCall`` only in model turns with a name and object args; every functionCall answered
    by a ``functionResponse`` in the user turn right after it (matched by id, else by name in order), and no
    functionResponse without its functionCall there.
    """
    contents = as_items(items)
    pending: list[tuple[str, str | None, int]] = []  # (name, id, index of the model turn)
    for index, raw in enumerate(contents):
        role = role_of(raw)
        if role in ("system", "developer"):
            _parts(raw, index)
            continue
        if role not in ("user", "model"):
            raise InvalidHistory(f"role must be 'user' or 'model', got {role!r}", index=index, field="role")
        parts = _parts(raw, index)
        if role == "model":
            if pending:
                _unanswered(pending)
            pending = _calls(parts, index)
        else:
            _responses(parts, index, pending)
            if pending:
                _unanswered(pending)
    if pending:
        _unanswered(pending)


def _parts(raw: Mapping[str, Any], index: int) -> list[Mapping[str, Any]]:
    parts = expect_list(raw.get("parts"), index, "parts")
    if not parts:
        raise InvalidHistory("parts must not be empty", index=index, field="parts")
    checked = [expect_mapping(p, index, f"parts[{k}]") for k, p in enumerate(parts)]
    for k, part in enumerate(checked):
        check_camel_case(part, index, f"parts[{k}]")
    return checked


def _unanswered(pending: list[tuple[str, str | None, int]]) -> None:
    name, call_id, index = pending[0]
    label = f"{name!r}" + (f" (id {call_id!r})" if call_id else "")
    problem = f"functionCall {label} has no functionResponse in the next user turn"
    raise InvalidHistory(problem, index=index, field="parts")


def _calls(parts: list[Mapping[str, Any]], index: int) -> list[tuple[str, str | None, int]]:
    calls: list[tuple[str, str | None, int]] = []
    for k, part in enumerate(parts):
        if "functionResponse" in part:
            raise InvalidHistory("a model turn cannot hold a functionResponse", index=index, field=f"parts[{k}]")
        if "functionCall" not in part:
            continue
        field = f"parts[{k}].functionCall"
        call = expect_mapping(part["functionCall"], index, field)
        name = expect_str(call.get("name"), index, f"{field}.name", nonempty=True)
        if "args" in call:
            expect_mapping(call["args"], index, f"{field}.args")
        call_id = call.get("id")
        if call_id is not None:
            expect_str(call_id, index, f"{field}.id", nonempty=True)
        calls.append((name, call_id, index))
    return calls


def _responses(parts: list[Mapping[str, Any]], index: int, pending: list[tuple[str, str | None, int]]) -> None:
    for k, part in enumerate(parts):
        if "functionCall" in part:
            raise InvalidHistory("a user turn cannot hold a functionCall", index=index, field=f"parts[{k}]")
        if "functionResponse" not in part:
            continue
        field = f"parts[{k}].functionResponse"
        response = expect_mapping(part["functionResponse"], index, field)
        name = expect_str(response.get("name"), index, f"{field}.name", nonempty=True)
        if "response" in response:
            expect_mapping(response["response"], index, f"{field}.response")
        call_id = response.get("id")
        match = next(
            (c for c in pending if (c[1] == call_id if call_id is not None and c[1] is not None else c[0] == name)),
            None,
        )
        if match is None or match[0] != name:
            problem = f"functionResponse {name!r} has no matching functionCall in the model turn right before it"
            raise InvalidHistory(problem, index=index, field=field)
        pending.remove(match)
