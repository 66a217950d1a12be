"""A processor remembers the (key, string) items its redactor kept, at that redactor's state (issue 22, nineteenth
session, lane s19a): a session's events repeat their names, session id and model call after call, and each went
through the key rule, the bulk clearing and the redactor's clean strings again. No secret may pass because of it: a
string learned as a secret after it was remembered, a key naming a secret, a user's hook or a callback.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.exporters.base import InMemoryExporter
from contextfold.redact import Redactor
from contextfold.telemetry import BatchProcessor, CustomEvent, Event, TokenEstimate
from contextfold.telemetry._session_redaction import unscanned

_NONCE = "c4p9vx"  # (texts of this test only: no cache of another test's can answer for them)
_PATIENCE_S = 10.0  # (a generous bound: only a broken processor takes this long)


def _estimate(model: str) -> TokenEstimate:
    return TokenEstimate(system=1, developer=0, tools_schema=2, messages=30, model=model, context_window=1000,
                         session_id=f"s-{_NONCE}")


class _Batches:
    """A processor whose events are exported batch by batch (each ``send`` flushes)."""

    def __init__(self, redact: Any) -> None:
        self.exporter = InMemoryExporter()
        self.processor = BatchProcessor(self.exporter, redact=redact)

    def send(self, events: list[Event]) -> list[dict[str, Any]]:
        before = len(self.exporter.events)
        for event in events:
            self.processor.emit(event)
        assert self.processor.flush(_PATIENCE_S)
        return list(self.exporter.events[before:])

    def close(self) -> None:
        self.processor.shutdown()


def _counting(redactor: Redactor) -> list[tuple[Any, Any]]:
    asked: list[tuple[Any, Any]] = []
    item = redactor._redact_item

    def counting(key: Any, value: Any) -> Any:
        asked.append((key, value))
        return item(key, value)

    redactor._redact_item = counting  # type: ignore[method-assign,assignment]
    return asked


def test_a_sessions_repeated_strings_reach_the_key_rule_once() -> None:
    redactor = Redactor()
    asked = _counting(redactor)
    batches = _Batches(redactor.redact_obj)
    try:
        first = batches.send([_estimate(f"m-{_NONCE}")])
        assert asked  # (the first event's strings: name, kind, session id, model, source)
        asked.clear()
        later = batches.send([_estimate(f"m-{_NONCE}") for _ in range(5)])
    finally:
        batches.close()
    assert asked == []  # (each of them asked again before)
    assert [record["data"] for record in later] == [first[0]["data"]] * 5
    assert len({record["span_id"] for record in first + later}) == 6


def test_a_string_learned_as_a_secret_after_it_was_remembered_is_redacted() -> None:
    secret = f"m-{_NONCE}Zr81kQ"
    redactor = Redactor()
    batches = _Batches(redactor.redact_obj)
    try:
        assert batches.send([_estimate(secret)])[0]["data"]["model"] == secret  # (clean then: remembered so)
        redactor.learn(secret, "api_key")  # (the agent's thread learns it from a message)
        after = batches.send([_estimate(secret), _estimate(secret)])
    finally:
        batches.close()
    assert secret not in str(after)
    assert all(record["data"]["model"] == "[REDACTED:api_key]" for record in after)


def test_a_secret_learned_earlier_in_the_same_batch_is_redacted_in_a_later_event() -> None:
    # (review of lane s19a) The records a run passes as clean are chosen at the state read before it; one redacted
    # in that run can teach a secret (here the key rule), and every record after it must see the secret learned.
    value = f"T{_NONCE}q83zLw9Kd2p"
    redactor = Redactor()
    exporter = InMemoryExporter()
    processor = BatchProcessor(exporter, redact=redactor.redact_obj, schedule_delay_s=60.0)  # (a batch a flush)

    def event(attributes: dict[str, Any]) -> CustomEvent:
        return CustomEvent(event="tool.call", attributes=attributes, session_id=f"s-{_NONCE}")

    try:
        processor.emit(event({"note": value}))
        assert processor.flush(_PATIENCE_S)
        assert exporter.events[-1]["data"]["note"] == value  # (clean then: remembered so)
        processor.emit(event({"password": value}))
        processor.emit(event({"note": value}))
        processor.emit(event({"meta": {"note": value}}))
        assert processor.flush(_PATIENCE_S)
    finally:
        processor.shutdown()
    taught, *after = exporter.events[-3:]
    assert taught["data"]["password"] == "[REDACTED:password]"
    assert value not in str(after)
    assert after[0]["data"]["note"] == "[REDACTED:password]"


def test_a_secret_learned_through_another_redactor_of_the_session_is_redacted() -> None:
    # The archive's redactor and the outgoing one share the session's memory: what one learns, both redact.
    secret = f"m-{_NONCE}Wq72pL"
    session = Redactor()
    outgoing = session.for_telemetry()
    batches = _Batches(outgoing.redact_obj)
    try:
        assert batches.send([_estimate(secret)])[0]["data"]["model"] == secret
        session.learn(secret, "password")
        after = batches.send([_estimate(secret)])
    finally:
        batches.close()
    assert secret not in str(after)


def test_a_key_naming_a_secret_is_redacted_every_time() -> None:
    redactor = Redactor()
    batches = _Batches(redactor.redact_obj)
    value = f"plain{_NONCE}v1"
    try:
        out = [batches.send([CustomEvent(event="tool.call", attributes={"api_key": value, "note": "n"},
                                         session_id=f"s-{_NONCE}")])[0] for _ in range(3)]
    finally:
        batches.close()
    assert value not in str(out)
    assert [record["data"] for record in out] == [{"api_key": "[REDACTED:api_key]", "note": "n"}] * 3


def test_a_callback_rewrites_every_event() -> None:
    # A user's last pass over every redacted string (here: coarsening a model's name) keeps events off the pairs.
    redactor = Redactor(callback=lambda text: text.replace(f"m-{_NONCE}", "a model"))
    batches = _Batches(redactor.redact_obj)
    try:
        out = [batches.send([_estimate(f"m-{_NONCE}")])[0] for _ in range(3)]
    finally:
        batches.close()
    assert [record["data"]["model"] for record in out] == ["a model"] * 3


_SECRET = f"sk-{_NONCE}Q9vL2mX7rT4yB8nC1dF6gH3j"
_texts = st.sampled_from(["ok", f"bash {_SECRET}", f"password={_NONCE}Zq81kW", "gpt-4o", "", f"m-{_NONCE}",
                          "[REDACTED:x]", f"{_NONCE}Zq81kW"])
_keys = st.sampled_from(["tool", "api_key", "password", "count", "meta", "note", "model"])
_values = st.recursive(st.one_of(_texts, st.integers(), st.booleans(), st.none()),
                       lambda inner: st.one_of(st.lists(inner, max_size=3),
                                               st.dictionaries(_keys, inner, max_size=3)), max_leaves=8)
_batches = st.lists(st.lists(st.dictionaries(_keys, _values, max_size=4), min_size=1, max_size=10),
                    min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(_batches)
def test_the_exported_events_are_those_redacted_one_by_one(batches: list[list[dict[str, Any]]]) -> None:
    # The same events, batch by batch, through our redactor's hook (remembered pairs, bulk clearing) and through a
    # hook of the same redactor's settings that is no redactor's method (each event redacted whole, as before).
    remembered, alone = Redactor(), Redactor()
    events = [[CustomEvent(event="tool.call", attributes=attributes, session_id=f"s-{_NONCE}")
               for attributes in batch] for batch in batches]
    ours, whole = _Batches(remembered.redact_obj), _Batches(lambda record: alone.redact_obj(record))
    try:
        for batch in events:
            assert ours.send(list(batch)) == whole.send(list(batch))
    finally:
        ours.close()
        whole.close()
    assert _SECRET not in str(ours.exporter.events)


def test_ids_and_times_checked_once_are_still_checked() -> None:
    # The last trace id found ours and an end that is its start's very string skip a second check; nothing else.
    span, trace = "a1b2c3d4e5f60718", "0123456789abcdef0123456789abcdef"
    time = "2026-11-27T13:05:41.123456Z"
    assert unscanned({"trace_id": trace, "span_id": span, "started_at": time, "ended_at": time}) == \
        {"trace_id": trace, "span_id": span, "started_at": time, "ended_at": time}
    assert unscanned({"trace_id": trace, "span_id": span, "started_at": None, "ended_at": None}) == \
        {"trace_id": trace, "span_id": span}
    assert unscanned({"trace_id": f"{trace[:-4]}{_NONCE[:4]}", "span_id": span, "parent_id": None,
                      "started_at": f"{time} password=x", "ended_at": f"{time} password=x"}) == {"span_id": span}
