"""SWE-agent text tool calls: ``<function=NAME><parameter=P>value</parameter></function>``."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.importers.swe_agent import parse_swe_agent, parse_text_call

CALL = "Let me look.\n\n<function=bash>\n<parameter=command>ls -la /testbed</parameter>\n</function>"


def test_parses_name_parameters_and_the_text_before() -> None:
    call = parse_text_call(CALL)
    assert call is not None
    assert call.name == "bash"
    assert call.parameters == {"command": "ls -la /testbed"}
    assert call.text == "Let me look."
    assert json.loads(call.arguments) == {"command": "ls -la /testbed"}


def test_multiline_values_and_several_parameters_keep_order_and_bytes() -> None:
    text = (
        "<function=str_replace_editor>\n<parameter=command>str_replace</parameter>\n"
        "<parameter=path>/a.py</parameter>\n<parameter=old_str>  x = 1\r\n</parameter>\n"
        "<parameter=new_str>\n  x = 2\n</parameter>\n</function>"
    )
    call = parse_text_call(text)
    assert call is not None and call.text == ""
    assert list(call.parameters) == ["command", "path", "old_str", "new_str"]
    assert call.parameters["old_str"] == "  x = 1\r\n"
    assert call.parameters["new_str"] == "\n  x = 2\n"


def test_text_after_the_block_is_kept() -> None:
    call = parse_text_call("before\n<function=submit>\n</function>\nafter")
    assert call is not None and call.parameters == {} and call.text == "before\n\nafter"


def test_not_calls() -> None:
    assert parse_text_call("no call here") is None
    assert parse_text_call("<function=bash>\n<parameter=command>ls</parameter>") is None, "unclosed block"
    assert parse_text_call("<function=bash>junk<parameter=command>ls</parameter></function>") is None
    assert parse_text_call("<function=bash><parameter=a>1</parameter><parameter=a>2</parameter></function>") is None
    assert parse_text_call("<function=bash><parameter=a>1</parameter>tail</function>") is None


_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
# Values are anything the model could write except the closing tag itself.
_values = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40).filter(
    lambda v: "</parameter>" not in v and "</function>" not in v
)


@settings(max_examples=200)
@given(
    name=_names,
    params=st.dictionaries(_names, _values, max_size=4),
    before=st.text(max_size=30).filter(lambda t: "<function=" not in t),
)
def test_parse_recovers_what_was_written(name: str, params: dict[str, str], before: str) -> None:
    body = "".join(f"\n<parameter={k}>{v}</parameter>" for k, v in params.items())
    call = parse_text_call(f"{before}<function={name}>{body}\n</function>")
    assert call is not None
    assert call.name == name
    assert call.parameters == params
    assert json.loads(call.arguments) == params
    assert call.text == before.rstrip()


def _history(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"history": [{"role": "system", "content": "sys"}, *entries], "info": {"exit_status": "submitted"}}


def test_a_call_without_an_observation_after_it_stays_text() -> None:
    text = "<function=bash>\n<parameter=command>ls</parameter>\n</function>"
    session = parse_swe_agent(_history({"role": "assistant", "content": text, "tool_calls": None}), session_id="s")
    last = session.messages[-1]
    assert last.role == "assistant" and not last.tool_calls and last.content == text


def test_observation_becomes_the_tool_result_and_other_users_stay_users() -> None:
    session = parse_swe_agent(
        _history(
            {"role": "user", "content": "task", "message_type": "observation"},
            {"role": "assistant", "content": "I'll try.", "message_type": "action"},
            {"role": "user", "content": "OBSERVATION:\nnope", "message_type": "observation"},
            {"role": "assistant", "content": CALL, "message_type": "action", "thought": "Let me look."},
            {"role": "user", "content": "Your command ran successfully", "message_type": "observation"},
        ),
        session_id="s",
    )
    roles = [m.role for m in session.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert session.messages[4].tool_calls[0].id == "call_4"
    assert session.messages[5].tool_call_id == "call_4"
    assert session.messages[5].content == "Your command ran successfully"
    assert session.messages[4].meta["source_extra"] == {"message_type": "action", "thought": "Let me look."}
    assert session.metadata == {"exit_status": "submitted"}
    assert all(not m.extra for m in session.messages), "recorder keys never reach a provider"


def test_native_tool_call_ids_list_gives_one_result_per_id() -> None:
    call = {"id": "a", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    session = parse_swe_agent(
        _history(
            {"role": "assistant", "content": "", "tool_calls": [call, {**call, "id": "b"}]},
            {"role": "tool", "content": [{"type": "text", "text": "out"}], "tool_call_ids": ["a", "b"]},
        ),
        session_id="s",
    )
    results = session.messages[2:]
    assert [m.tool_call_id for m in results] == ["a", "b"]
    assert all(m.text == "out" and m.meta["shared_output"] == 2 for m in results)


def test_message_level_cache_control_moves_to_the_last_block() -> None:
    call = {"id": "a", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    session = parse_swe_agent(
        _history(
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": "out", "tool_call_ids": ["a"], "cache_control": {"type": "ephemeral"}},
        ),
        session_id="s",
    )
    (part,) = session.messages[-1].parts
    assert part.text == "out" and part.cache_control == {"type": "ephemeral"}
