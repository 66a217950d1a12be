"""Converting between formats keeps every tool pair, every text and every role; detection and lookup."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from _fmt_helpers import FORMAT_NAMES, TRAJECTORIES, require, shape, tool_pairs
from hypothesis import given, settings
from strategies import histories

from contextfold.errors import InvalidHistory
from contextfold.formats import FORMATS, convert, detect_format, get_format
from contextfold.messages import Message, ThinkingPart
from contextfold.pairing import pair_list

PAIRS = [(a, b) for a in FORMAT_NAMES for b in FORMAT_NAMES if a != b]
TAU_BENCH = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"


def _merged(messages: list[Message], *, thinking_dropped: bool) -> list[Message]:
    """The Responses view: calls that directly follow an assistant turn join it (items carry no boundary).

    Through chat, which cannot carry reasoning, or Responses, which cannot read another provider's signed reasoning,
    a turn that held only reasoning and calls is such a turn too.
    """
    out: list[Message] = []
    for m in messages:
        bare = m.content == "" or (thinking_dropped and all(isinstance(p, ThinkingPart) for p in m.content))
        if m.role == "assistant" and bare and m.tool_calls and out and out[-1].role == "assistant":
            out[-1] = replace(out[-1], tool_calls=out[-1].tool_calls + m.tool_calls)
        else:
            out.append(m)
    return out


def _through(messages: list[Message], src: str, dst: str) -> list[Message]:
    a, b = get_format(src), get_format(dst)
    middle = b.encode(a.decode(a.encode(messages)))
    b.validate(middle)
    return a.decode(convert(middle, dst, src))


@pytest.mark.parametrize(("src", "dst"), PAIRS)
@settings(max_examples=12, deadline=None)
@given(history=histories())
def test_a_to_b_to_a_keeps_pairs_texts_and_roles(src: str, dst: str, history: list[Message]) -> None:
    back = _through(history, src, dst)
    own = get_format(src).decode(get_format(src).encode(history))  # what the source format itself keeps
    if "openai_responses" in (src, dst):
        own = _merged(own, thinking_dropped=True)  # the drawn thinking is signed: Anthropic's or Gemini's
    expected = own
    assert tool_pairs(back) == tool_pairs(history)
    assert shape(back) == shape(expected)


@pytest.mark.parametrize("dst", FORMAT_NAMES)
def test_tau_bench_sessions_keep_every_pair_through_every_format(dst: str) -> None:
    require(TAU_BENCH.is_file(), f"{TAU_BENCH} not found")
    chat = get_format("openai_chat")
    for number, entry in enumerate(json.loads(TAU_BENCH.read_text())):
        messages = chat.decode(entry["traj"])
        back = _through(messages, "openai_chat", dst)
        assert _answered(back) == _answered(messages), number
        # tau-bench's assistant never speaks beside a call, so no turn merges even through Responses
        assert shape(back) == shape(messages), number
        ids = _once_each(messages) if dst == "anthropic" else [m.tool_call_id for m in messages]
        assert [m.tool_call_id for m in back] == ids, number


def _answered(messages: list[Message]) -> list[tuple[str, object, str]]:
    """(name, arguments, result text) of every call, paired as the manager pairs them.

    (A result answers the latest call with its id.)
    """
    out = []
    for pair in pair_list(messages):
        call = next(c for c in messages[pair.call_index].tool_calls if c.id == pair.call_id)
        result = "<missing>" if pair.result_index is None else messages[pair.result_index].text
        out.append((call.name, call.parsed_arguments(), result))
    return out


def _once_each(messages: list[Message]) -> list[str | None]:
    """The tool_call_id of each message as Anthropic gets them.

    A call reusing an earlier call's id (gpt-4o's come back: 49 of these sessions) is sent as ``<id>_2`` (``_3``,
    …), and its results with it.
    """
    calls: dict[str, int] = {}
    now: dict[str, str] = {}
    out: list[str | None] = []
    for m in messages:
        for call in m.tool_calls:
            calls[call.id] = calls.get(call.id, 0) + 1
            now[call.id] = call.id if calls[call.id] == 1 else f"{call.id}_{calls[call.id]}"
        out.append(None if m.tool_call_id is None else now.get(m.tool_call_id, m.tool_call_id))
    return out


def test_gemini_without_ids_pairs_by_order_and_name_and_keeps_pairs_elsewhere() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "weather in Paris and Rome, then the time"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "weather", "args": {"city": "Paris"}}},
                {"functionCall": {"name": "time", "args": {}}},
                {"functionCall": {"name": "weather", "args": {"city": "Rome"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "weather", "response": {"output": "sunny"}}},
                {"functionResponse": {"name": "weather", "response": {"output": "rain"}}},
                {"functionResponse": {"name": "time", "response": {"hour": 12}}},
            ],
        },
    ]
    gemini = get_format("gemini")
    gemini.validate(contents)
    messages = gemini.decode(contents)
    assert gemini.decode(contents) == messages  # synthetic ids are stable
    pairs = tool_pairs(messages)
    assert [(name, args, out) for _, name, args, out in pairs] == [
        ("weather", {"city": "Paris"}, "sunny"),
        ("time", {}, '{"hour": 12}'),
        ("weather", {"city": "Rome"}, "rain"),
    ]
    assert len({call_id for call_id, *_ in pairs}) == 3
    assert gemini.encode(messages) == contents  # no invented ids on the way back
    for fmt in ("openai_chat", "anthropic", "openai_responses"):
        wire = get_format(fmt)
        encoded = convert(contents, "gemini", fmt)
        wire.validate(encoded)
        assert tool_pairs(wire.decode(encoded)) == pairs
        again = convert(encoded, fmt, "gemini")
        gemini.validate(again)
        assert tool_pairs(gemini.decode(again)) == pairs


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@settings(max_examples=10, deadline=None)
@given(history=histories(min_turns=1))
def test_detect_format_recognises_histories_with_tool_calls(fmt: str, history: list[Message]) -> None:
    encoded = get_format(fmt).encode(history)
    detected = detect_format(encoded)
    if any(m.tool_calls for m in history) or fmt == "gemini":
        assert detected == fmt
    # plain role/content dicts are read as chat, which gives the same conversation
    assert shape(get_format(detected).decode(encoded)) == shape(get_format(fmt).decode(encoded))


def test_detect_format_on_typical_first_items() -> None:
    assert detect_format([{"role": "user", "content": "hi"}]) == "openai_chat"
    assert detect_format([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]) == (
        "openai_responses"
    )
    assert detect_format([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}]) == "openai_responses"
    assert detect_format([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]) == "anthropic"
    assert detect_format([{"role": "user", "parts": [{"text": "x"}]}]) == "gemini"
    assert detect_format([{"role": "system", "content": "s"}, {"role": "tool", "tool_call_id": "c"}]) == "openai_chat"
    with pytest.raises(InvalidHistory, match="message 0"):
        detect_format([{"foo": 1}])
    with pytest.raises(InvalidHistory):
        detect_format([])


def test_get_format_names_the_valid_formats() -> None:
    assert set(FORMATS) == set(FORMAT_NAMES)
    for name, module in FORMATS.items():
        assert get_format(name) is module
        assert name == module.NAME
    with pytest.raises(ValueError, match=r"anthropic.*gemini.*openai_chat.*openai_responses"):
        get_format("bedrock")


def test_convert_auto_detects_the_source() -> None:
    items = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    assert convert(items, "auto", "anthropic") == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]},
    ]
