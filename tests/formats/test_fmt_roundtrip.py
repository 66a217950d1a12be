"""Round trips: Messages -> wire -> Messages per format, wire -> Messages -> wire on real recorded sessions."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from _fmt_helpers import FORMAT_NAMES, TRAJECTORIES, all_session_files, comparable, expressible, require
from hypothesis import given, settings
from strategies import histories

from contextfold.formats import get_format
from contextfold.messages import Message

TAU_BENCH = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"


@cache
def _tau_bench() -> list[list[dict[str, Any]]]:
    return [entry["traj"] for entry in json.loads(TAU_BENCH.read_text())]


def _sessions(path: Path) -> list[list[Message]]:
    try:
        from contextfold.importers._files import load_sessions
    except ImportError:  # the importers arrive separately; tau-bench is OpenAI chat already
        require(path == TAU_BENCH, "contextfold.importers.load_sessions is not available")
        return [get_format("openai_chat").decode(t) for t in _tau_bench()]
    return [s.messages for s in load_sessions(path)]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@settings(max_examples=40, deadline=None)
@given(history=histories())
def test_decode_encode_is_identity_on_what_the_format_expresses(fmt: str, history: list[Message]) -> None:
    wire = get_format(fmt)
    expected = expressible(history, fmt)
    encoded = wire.encode(history)
    wire.validate(encoded)
    assert comparable(wire.decode(encoded), fmt) == expected
    # the reduced history is a fixed point: nothing more is lost on a second trip
    assert wire.encode(wire.decode(encoded)) == encoded


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@settings(max_examples=40, deadline=None)
@given(history=histories())
def test_encode_output_is_json_and_does_not_share_state(fmt: str, history: list[Message]) -> None:
    wire = get_format(fmt)
    encoded = wire.encode(history)
    assert json.loads(json.dumps(encoded)) == encoded
    decoded = wire.decode(encoded)
    encoded.clear()  # mutating what was passed in must not reach the Messages
    assert wire.encode(decoded) == wire.encode(history)


def test_tau_bench_wire_dicts_come_back_byte_for_byte() -> None:
    require(TAU_BENCH.is_file(), f"{TAU_BENCH} not found")
    chat = get_format("openai_chat")
    for number, traj in enumerate(_tau_bench()):
        messages = chat.decode(traj)
        assert chat.encode(messages) == traj, number
        chat.validate(traj)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_tau_bench_wire_round_trips_through_every_format(fmt: str) -> None:
    require(TAU_BENCH.is_file(), f"{TAU_BENCH} not found")
    chat, wire = get_format("openai_chat"), get_format(fmt)
    for traj in _tau_bench()[:50]:
        encoded = wire.encode(chat.decode(traj))
        assert wire.encode(wire.decode(encoded)) == encoded


@pytest.mark.parametrize("path", all_session_files(), ids=lambda p: p.name)
def test_every_recorded_session_round_trips_in_every_format(path: Path) -> None:
    sessions = _sessions(path)
    assert sessions
    for messages in sessions:
        assert messages
        for fmt in FORMAT_NAMES:
            wire = get_format(fmt)
            encoded = wire.encode(messages)
            back = wire.decode(encoded)
            assert wire.encode(back) == encoded, fmt
            assert len(back) == len(messages), fmt
            assert [m.text for m in back] == [m.text for m in messages], fmt
            if fmt == "openai_chat":
                assert comparable(back, fmt) == comparable(messages, fmt)
