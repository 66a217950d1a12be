"""Tool call ids another provider wrote, sent to an API that refuses them.

Found on afa4c7c (red team, session 19): Anthropic takes a ``tool_use`` id only of letters, digits, ``_`` and ``-``
(the API answers 400 ``tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'``); OpenAI's Chat Completions
takes ids of at most 40 characters and the Responses API ``call_id`` values of at most 64 (400 ``string too long``).
A history recorded from another server (``functions.bash:0``, Kimi-style; a 46-character gateway id; an MCP
``server.tool/1``) was encoded as it was by ``prepare(format=...)`` and ``contextfold convert``, so the provider
refused every request of the session, and the format's own ``validate`` called it valid (replay counted such views
as valid turns).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold import ContextManager
from contextfold.cli import main
from contextfold.errors import InvalidHistory
from contextfold.formats import get_format
from contextfold.messages import Message, ToolCall

FOREIGN_IDS = ["functions.bash:0", "functions.bash_0", "x" * 46, "gw-" + "0123456789" * 7, "server.tool/1", "a b"]
_ANTHROPIC = re.compile(r"[A-Za-z0-9_-]+")


def _history(ids: list[str]) -> list[Message]:
    calls = tuple(ToolCall(i, "bash", json.dumps({"n": k})) for k, i in enumerate(ids))
    return [Message.user("run them"), Message("assistant", "", tool_calls=calls),
            *(Message.tool(i, f"output {k}") for k, i in enumerate(ids)), Message.assistant("done")]


def _wire_ids(target: str, items: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The ids of the calls and of the results, in order, as ``target`` spells them."""
    if target == "anthropic":
        blocks = [b for item in items if isinstance(item["content"], list) for b in item["content"]]
        return ([b["id"] for b in blocks if b["type"] == "tool_use"],
                [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"])
    if target == "openai_chat":
        return ([c["id"] for item in items for c in item.get("tool_calls") or ()],
                [item["tool_call_id"] for item in items if item["role"] == "tool"])
    return ([i["call_id"] for i in items if i.get("type") == "function_call"],
            [i["call_id"] for i in items if i.get("type") == "function_call_output"])


def _taken(target: str, call_id: str) -> bool:
    if target == "anthropic":
        return _ANTHROPIC.fullmatch(call_id) is not None
    return len(call_id) <= (40 if target == "openai_chat" else 64)


@pytest.mark.parametrize("target", ["anthropic", "openai_chat", "openai_responses"])
def test_encoded_ids_are_ones_the_api_takes_and_still_pair(target: str) -> None:
    wire = get_format(target)
    items = wire.encode(_history(FOREIGN_IDS))
    wire.validate(items)
    calls, results = _wire_ids(target, items)
    assert calls == results  # each result still answers its own call
    assert len(set(calls)) == len(FOREIGN_IDS)  # ids differing only in refused characters stay apart
    assert all(_taken(target, i) for i in calls)
    # Ids the API takes are sent as they are; the same history gives the same ids in every request (prompt cache).
    for original, sent in zip(FOREIGN_IDS, calls, strict=True):
        assert (sent == original) == _taken(target, original)
    assert wire.encode(_history(FOREIGN_IDS)) == items


@pytest.mark.parametrize(("target", "item", "field"), [
    ("anthropic", {"role": "assistant", "content": [{"type": "tool_use", "id": "functions.bash:0", "name": "bash",
                                                     "input": {}}]}, "content[0].id"),
    ("openai_chat", {"role": "assistant", "content": None, "tool_calls": [
        {"id": "x" * 41, "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}, "tool_calls[0].id"),
    ("openai_responses", {"type": "function_call", "call_id": "x" * 65, "name": "bash", "arguments": "{}"},
     "call_id"),
])
def test_validate_refuses_an_id_the_api_refuses(target: str, item: dict[str, Any], field: str) -> None:
    opening = {"type": "message", "role": "user", "content": "q"} if target == "openai_responses" else \
        {"role": "user", "content": "q"}
    with pytest.raises(InvalidHistory) as refused:
        get_format(target).validate([opening, item])
    assert refused.value.index == 1
    assert refused.value.field == field
    assert "refused by the API" in str(refused.value)


@given(st.text(min_size=1, max_size=120))
def test_any_id_is_sent_as_one_each_api_takes(call_id: str) -> None:
    for target in ("anthropic", "openai_chat", "openai_responses"):
        calls, results = _wire_ids(target, get_format(target).encode(_history([call_id])))
        assert calls == results
        assert _taken(target, calls[0])


def test_prepare_sends_anthropic_ids_it_takes() -> None:
    cm = ContextManager("claude-sonnet-4-5", store="memory")
    try:
        cm.add(_history(["functions.bash:0"]))
        request = cm.prepare(format="anthropic")
    finally:
        cm.close()
    get_format("anthropic").validate(request["messages"])
    calls, results = _wire_ids("anthropic", request["messages"])
    assert calls == results and _ANTHROPIC.fullmatch(calls[0])


def test_convert_writes_ids_the_target_takes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "kimi.jsonl"
    source.write_text("\n".join(json.dumps(item) for item in get_format("openai_chat").encode(
        [Message.user("q"), Message("assistant", "", tool_calls=(ToolCall("functions.bash:0", "bash", "{}"),)),
         Message.tool("functions.bash:0", "ok"), Message.assistant("done")])), encoding="utf-8")
    assert main(["convert", str(source), "--to", "anthropic"]) == 0
    items = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    get_format("anthropic").validate(items)
    assert items[1]["content"][0]["id"] == items[2]["content"][0]["tool_use_id"]
    assert _ANTHROPIC.fullmatch(items[1]["content"][0]["id"])


# Found on the first fix (review of s19f): the hash is public, so a history can hold, as an id the API takes, the
# very id a rewrite gives: ``a.b`` and ``a_b_<hash of a.b>`` were both sent as ``a_b_<hash>``, two calls with one id
# (Anthropic refuses the request; which output answers which call was lost). The ids that fit keep themselves; a
# rewrite landing on one is hashed again with a counter.


def _rewrite(call_id: str, keep: int | None = None, attempt: int = 0) -> str:
    salted = call_id.encode() + (b"\x00%d" % attempt if attempt else b"")
    kept = re.sub(r"[^A-Za-z0-9_-]", "_", call_id)[:keep]
    return kept + "_" + hashlib.blake2b(salted, digest_size=6).hexdigest()


COLLIDING = {  # a refused id, and the id that fits which its first rewrite gives
    "anthropic": ("a.b", _rewrite("a.b")),
    "openai_chat": ("c" * 41, _rewrite("c" * 41, 27)),
    "openai_responses": ("r" * 65, _rewrite("r" * 65, 51)),
}


@pytest.mark.parametrize("target", sorted(COLLIDING))
@pytest.mark.parametrize("order", ["refused first", "fitting first"])
def test_a_rewrite_never_lands_on_an_id_sent_as_it_is(target: str, order: str) -> None:
    refused, fitting = COLLIDING[target]
    ids = [refused, fitting] if order == "refused first" else [fitting, refused]
    wire = get_format(target)
    items = wire.encode(_history(ids))
    wire.validate(items)
    calls, results = _wire_ids(target, items)
    assert calls == results
    keep = {"anthropic": None, "openai_chat": 27, "openai_responses": 51}[target]
    expected = {fitting: fitting, refused: _rewrite(refused, keep, attempt=1)}  # s19f: both sent as `fitting`
    assert calls == [expected[i] for i in ids]
    assert wire.encode(_history(ids)) == items  # deterministic: the prompt cache's prefix stays


@given(st.lists(st.text(alphabet="ab.", min_size=1, max_size=4), min_size=1, max_size=8, unique=True),
       st.data())
def test_distinct_ids_are_sent_distinct(refused_or_not: list[str], data: st.DataObject) -> None:
    # Each rewrite of the history is also added as a literal id (the worst case), sometimes several counters deep.
    ids = list(refused_or_not)
    for call_id in refused_or_not:
        if "." in call_id:
            ids.extend(_rewrite(call_id, attempt=n) for n in range(data.draw(st.integers(0, 2))))
    wire = get_format("anthropic")
    calls, results = _wire_ids("anthropic", wire.encode(_history(ids)))
    assert calls == results
    assert len(set(calls)) == len(ids)
    assert all(_taken("anthropic", i) for i in calls)
