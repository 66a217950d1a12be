"""``Tracer.take_back_folded``: a rolled-back ``add()``'s folded no-op decisions, and only those, are un-counted."""

from __future__ import annotations

import threading

from contextfold.telemetry import RecordingTelemetry, Tracer, TriggerDecision


def _noop(tracer: Tracer) -> None:
    tracer.emit(TriggerDecision(triggered=False, reason="within the soft threshold"))


def test_only_what_the_recording_thread_folded_outside_a_span_is_taken_back() -> None:
    sink = RecordingTelemetry()
    tracer = Tracer("s19g-fold", sink)
    _noop(tracer)  # (folded before: a decision that holds)
    tracer.record_sent()
    _noop(tracer)  # (the commit's: taken back)
    other = threading.Thread(target=_noop, args=(tracer,))  # (another thread's meanwhile: not the commit's)
    other.start()
    other.join()
    tracer.stop_recording()
    assert tracer.noop_decisions == 3
    tracer.take_back_folded()
    assert tracer.noop_decisions == 2
    tracer.take_back_folded()  # (once)
    assert tracer.noop_decisions == 2
    with tracer.span("prepare"):  # (the next root span takes those that hold)
        _noop(tracer)  # (counted on its span, before the recording: it holds)
        tracer.record_sent()
        _noop(tracer)  # (counted on its span while recording: taken back from it and from the total)
        tracer.stop_recording()
        tracer.take_back_folded()
    assert tracer.noop_decisions == 3
    spans = [e for e in sink.events if e.name == "prepare"]
    assert [s.attributes.get("noop_decisions") for s in spans] == [3]
    assert not [e for e in sink.events if type(e) is TriggerDecision]
