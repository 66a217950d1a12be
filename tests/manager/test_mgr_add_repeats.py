"""A message object given many times in one ``add()`` is stored as equal objects given once each are (issue 22).

A repeated or resumed history gives one object many times (the 100,000 recorded messages of ``bench_scale.py`` are
~30 copies of 3,388): the write-time steps (boundary mark, foreign ref, size warning, write-time cut and its event)
run for its first copy, and later copies take that result with their own id.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import _cache
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import RecordingTelemetry

NONCE = "rpt7q2"


def _manager(telemetry: RecordingTelemetry | None = None) -> ContextManager:
    # A small window: outputs of a few hundred tokens are cut at write time.
    return ContextManager("gpt-4o", max_context_tokens=2_000, store="memory", archive="memory",
                          telemetry=telemetry, session_id=f"repeats-{NONCE}")


def _pool() -> list[Message]:
    long_output = "\n".join(f"{NONCE} line {i}: value={i * 7919 % 1000}" for i in range(400))
    return [
        Message.user(f"fix the bug {NONCE}"),
        Message.assistant("", [ToolCall("c1", "read", json.dumps({"path": f"/src/{NONCE}.py"}))]),
        Message.tool("c1", f"short output {NONCE}", name="read"),
        Message.tool("c1", long_output, name="read"),
        Message.tool("c1", long_output + " (protected)", name="read", meta={"protected": True}),
        Message.tool("c1", f"output with a ref {NONCE}", name="read", meta={"ref": "tool-output:foreign"}),
        Message.assistant(f"done {NONCE}", meta={"id": f"given-{NONCE}"}),
    ]


def _stored(cm: ContextManager) -> list[Message]:
    return list(cm._view.raw)


def _events(telemetry: RecordingTelemetry) -> list[tuple[Any, ...]]:
    return [(e.name, getattr(e, "ref", None), getattr(e, "bytes", None), getattr(e, "kept_bytes", None),
             getattr(e, "message", None)) for e in telemetry.events if e.name != "session.start"]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=40))
def test_repeated_objects_store_what_equal_distinct_objects_store(picks: list[int]) -> None:
    pool = _pool()
    repeated = [pool[k] for k in picks]
    distinct = [dataclasses.replace(pool[k]) for k in picks]  # equal, each its own object
    seen_r, seen_d = RecordingTelemetry(), RecordingTelemetry()
    with _manager(seen_r) as with_repeats, _manager(seen_d) as with_distinct:
        with_repeats._intake.id_prefix = with_distinct._intake.id_prefix  # (the same ids on both sides)
        with_repeats.add(repeated)
        with_distinct.add(distinct)
        assert _stored(with_repeats) == _stored(with_distinct)
        assert [m.meta for m in _stored(with_repeats)] == [m.meta for m in _stored(with_distinct)]
        assert _events(seen_r) == _events(seen_d)


def test_an_object_given_many_times_is_cut_once(monkeypatch: Any) -> None:
    calls: list[str] = []
    process = _cache.ToolOutputCache.process

    def counted(self: Any, message: Message, **kw: Any) -> Message:
        calls.append(message.text[:20])
        return process(self, message, **kw)

    monkeypatch.setattr(_cache.ToolOutputCache, "process", counted)
    pool = _pool()
    turn = [pool[1], pool[3]]
    seen = RecordingTelemetry()
    with _manager(seen) as cm:
        cm.add(turn * 50)
        stored = _stored(cm)
    assert len(calls) == 1
    outputs = [m for m in stored if m.role == "tool"]
    assert len(outputs) == 50 and len({m.meta["id"] for m in outputs}) == 50
    assert all(m.meta["kind"] == "truncated" and m.text == outputs[0].text for m in outputs)
    assert sum(e.name == "cache.truncated" for e in seen.events) == 50  # (one event per output stored)
