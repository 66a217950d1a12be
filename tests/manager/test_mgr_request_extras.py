"""What a request carries beside the messages (tool schemas, instructions, a response format) counts (issue 21)."""

from __future__ import annotations

import json

import pytest

from contextfold.errors import ConfigError
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.testing.agent_run import chat_tools

SCHEMA = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": {
    "type": "object", "properties": {"module": {"type": "string"}, "reason": {"type": "string"}}}}}
INSTRUCTIONS = "You are a build engineer. Read the logs page by page and report the first failing module."


def make() -> ContextManager:
    return ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory")


def test_each_extra_is_counted_with_the_view() -> None:
    cm = make()
    cm.add(Message.user("why does the build fail?"))
    bare = cm.tokens()
    assert cm.request_extras_tokens == 0
    assert cm.set_request_extras(tools=chat_tools())
    tools = cm.request_extras_tokens
    assert tools > 1_000 and cm.tokens() == bare + tools and len(cm.tools) == 12
    assert cm.set_request_extras(tools=chat_tools(), instructions=INSTRUCTIONS, response_format=SCHEMA)
    extras = cm.request_extras_tokens
    schema = cm.counter.counter.count(json.dumps(SCHEMA, separators=(",", ":"), sort_keys=True))
    assert extras == tools + cm.counter.count_message(Message("system", INSTRUCTIONS)) + schema
    assert not cm.set_request_extras(tools=chat_tools(), instructions=INSTRUCTIONS, response_format=SCHEMA)
    assert cm.set_request_extras()  # nothing sent any more: nothing counted
    assert cm.request_extras_tokens == 0 and cm.tools == []


def test_extras_move_the_thresholds_decision() -> None:
    # 5,600 tokens of conversation fit an 8K window (hard 6,500); with 12 tools' 1,500 tokens they do not. (Soft is
    # moved out of the way: over it, the 14 long user messages would be summarized already, as they should be.)
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory",
                        policy={"soft_pct": 0.95})
    cm.add([Message.user("read the log"), *[m for i in range(14) for m in (
        Message.assistant(f"reading part {i}", []), Message.user("line " * 380))]])
    cm.prepare()
    assert cm.compactions == 0
    cm.set_request_extras(tools=chat_tools())
    cm.prepare()
    assert cm.compactions == 1 and cm.tokens() <= cm.budgets.hard


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"tools": ["read_file"]}, "tools[0]"), ({"instructions": 7}, "instructions"),
    ({"response_format": "json"}, "response_format")])
def test_bad_extras_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        make().set_request_extras(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
